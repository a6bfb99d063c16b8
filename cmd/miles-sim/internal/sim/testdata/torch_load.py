"""Load a simulated dump directory with torch's safe loader and print what it read as one JSON line.

Usage: python3 torch_load.py DIR [PLAIN.pt]   (run by TestDumpsLoadWithTorch; needs torch, e.g. Debian python3-torch)

Per step: the rollout dump's sample indexes, rewards, response lengths and token counts; the train shards' ranks
and CP ranks; and per sample the log_probs reassembled from the CP slices with the rule of miles-cp-layout.md
(an implementation independent of the Go writer's), so the test can compare them with what it wrote.
"""
import json
import os
import pickle
import re
import sys
import types

import torch

# What the simulator's pickles may reference: the dashboard's allow-list subset torch.save emits for them.
ALLOWED = {("torch._utils", "_rebuild_tensor_v2"), ("collections", "OrderedDict"), ("torch", "FloatStorage"),
           ("torch", "IntStorage"), ("torch", "LongStorage")}


class RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed")
        return super().find_class(module, name)


restricted = types.SimpleNamespace(__name__="restricted", Unpickler=RestrictedUnpickler, load=pickle.load)
LOADERS = set()


def load(path):
    """torch.load(weights_only=True); torch < 2.0's weights-only unpickler has no BINFLOAT opcode (it refuses the
    Python floats of torch.save's own output too), so there the same load runs with an unpickler that allows the
    same few globals and nothing else."""
    try:
        obj = torch.load(path, weights_only=True)
        LOADERS.add("weights_only=True")
        return obj
    except pickle.UnpicklingError as e:
        if "Unsupported operand 71" not in str(e):
            raise
    LOADERS.add("restricted unpickler (torch %s weights_only has no BINFLOAT)" % torch.__version__)
    return torch.load(path, pickle_module=restricted)


def cp_ranges(T, R, cp):
    cs = -(-T // (2 * cp))
    P = T - R
    out = []
    for r in range(cp):
        rr = []
        for c0, c1 in ((r * cs, (r + 1) * cs), ((2 * cp - r - 1) * cs, (2 * cp - r) * cs)):
            s, e = max(c0, P - 1), min(c1, T - 1)
            if s < e:
                rr.append((s - (P - 1), e - (P - 1)))
        out.append(rr)
    return out


def main(d):
    res = {"torch": torch.__version__, "steps": {}}
    for name in sorted(os.listdir(os.path.join(d, "rollout_data"))):
        m = re.fullmatch(r"(\d+)\.pt", name)
        if not m:
            continue
        step = int(m.group(1))
        ro = load(os.path.join(d, "rollout_data", name))
        assert ro["rollout_id"] == step, ro["rollout_id"]
        samples = ro["samples"]
        for s in samples:
            assert isinstance(s["tokens"], list) and all(isinstance(x, int) for x in s["tokens"])
            assert len(s["loss_mask"]) == s["response_length"] == len(s["rollout_log_probs"])
            assert all(isinstance(v, str) for v in s["weight_versions"])
        st = {"indices": [s["index"] for s in samples], "rewards": [s["reward"] for s in samples],
              "response_lengths": [s["response_length"] for s in samples],
              "total_lengths": [len(s["tokens"]) for s in samples], "shards": {}, "log_probs": {}}
        slices = {}  # sample index -> cp_rank -> tensor
        total = {}
        for f in sorted(os.listdir(os.path.join(d, "train_data"))):
            m = re.fullmatch(r"(\d+)_(\d+)\.pt", f)
            if not m or int(m.group(1)) != step:
                continue
            sh = load(os.path.join(d, "train_data", f))
            rd = sh["rollout_data"]
            assert sh["rank"] == int(m.group(2)) and sh["qkv_format"] == "thd"
            st["shards"][m.group(2)] = {"cp_rank": sh["cp_rank"], "cp_size": sh["cp_size"], "rows": len(rd["sample_indices"])}
            assert rd["raw_reward"] == st["rewards"]
            for i, si in enumerate(rd["sample_indices"]):
                assert rd["tokens"][i].dtype == torch.int64 and rd["loss_masks"][i].dtype == torch.int32
                assert rd["log_probs"][i].dtype == torch.float32
                assert rd["tokens"][i].tolist() == samples[st["indices"].index(si)]["tokens"]
                total[si] = (rd["total_lengths"][i], rd["response_lengths"][i], sh["cp_size"])
                slices.setdefault(si, {}).setdefault(sh["cp_rank"], rd["log_probs"][i])
        for si, (T, R, cp) in total.items():
            out = [None] * R
            for r, rr in enumerate(cp_ranges(T, R, cp)):
                vals = slices[si][r].tolist()
                k = 0
                for a, b in rr:
                    out[a:b] = vals[k:k + b - a]
                    k += b - a
                assert k == len(vals)
            assert None not in out
            st["log_probs"][str(si)] = out
        res["steps"][str(step)] = st
    res["loaders"] = sorted(LOADERS)
    print(json.dumps(res))
    print("ok", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 2:  # a float-free file: torch's own weights-only unpickler must take it as is
        obj = torch.load(sys.argv[2], weights_only=True)
        assert obj["t"].dtype == torch.int64 and obj["t"].tolist() == [3, 1, 2], obj
        assert obj["nested"] == [{"k": "v", "n": None, "b": True}, []] and obj["big"] == 1 << 40, obj
    main(sys.argv[1])
