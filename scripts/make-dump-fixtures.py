#!/usr/bin/env python3
"""Write miles-layout dump fixtures with real torch for dashboard/dumps.

Usage (from the repository root):

    scripts/make-dump-fixtures.py                      # writes dashboard/dumps/testdata/run + expected.json
    scripts/make-dump-fixtures.py --big DIR            # a 256-sample x 8k-token step for the dashboard/dumps benchmarks

Environment. torch comes from Debian (`apt-get install python3-torch`, 1.13.1 on bookworm, ~50 MB installed):
the PyPI torch wheel for Linux pulls several GB of CUDA libraries, and the CPU-only index is not reachable here.
The script creates `.venv-fixtures/` (gitignored) from /usr/bin/python3 with --system-site-packages, so the Debian
torch and numpy are visible, and pip-installs `tokenizers` (builds the real tokenizer.json) and `polars` (writes
the dashboard_columns parquet mirror the way miles does) into it. It re-executes itself inside that venv.

What it writes (the exact layouts of ../shared/reference/miles-dashboard.md §2.5-2.9 and miles-cp-layout.md):

  run/tokenizer/tokenizer.json            byte-level BPE trained here with `tokenizers`, chat special tokens
  run/rollout_data/1.pt                   12 samples (6 GRPO groups x 2), multi-turn + tool calls, mixed versions
  run/rollout_data/eval_1.pt              eval samples of two datasets, flattened
  run/rollout_data/2.pt, 3.pt, 4.pt       steps for the pipeline-parallel, legacy-CP and bshd train layouts
  run/train_data/1_<rank>.pt              dp2 x cp2 x tp2 (8 ranks), cp_rank/cp_size recorded, thd
  run/train_data/2_<rank>.pt              dp2 x pp2: only the last stage holds forward-pass fields
  run/train_data/3_<rank>.pt              dp1 x cp2 x tp1, legacy: no cp_rank/cp_size keys
  run/train_data/4_<rank>.pt              dp1 x cp2, qkv_format bshd with max_seq_lens
  run/dashboard_columns/rollout_1.parquet the per-token mirror (row_group_size=8, miles' schema)
  run/trajectory/1.jsonl, eval_1.jsonl    conversation sidecars (roles, thinking, tool calls)
  run/dashboard/meta.json                 so the directory is also a valid run for the server
  evil.pt                                 a torch.save of an object whose __reduce__ is os.system (never loaded)
  expected.json                           every value the Go tests assert, as torch/tokenizers produced it
"""

import argparse
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv-fixtures")


def ensure_venv():
    if os.environ.get("MILES_FIXTURE_VENV") == "1":
        return
    py = os.path.join(VENV, "bin", "python")
    try:
        subprocess.run(["/usr/bin/python3", "-c", "import torch"], check=True, capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError):
        sys.exit("torch is missing: run `apt-get install -y python3-torch python3-venv` (Debian) first")
    if not os.path.exists(py):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV], check=True)
    r = subprocess.run([py, "-c", "import tokenizers, polars"], capture_output=True)
    if r.returncode != 0:
        subprocess.run([py, "-m", "pip", "install", "-q", "tokenizers", "polars"], check=True)
    env = dict(os.environ, MILES_FIXTURE_VENV="1")
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


ensure_venv()

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# added as normal (non-special) added tokens: they are text the conversation view parses
MARKUP = ["<think>", "</think>", "<tool_call>", "</tool_call>"]

CORPUS = [
    "You are a helpful assistant that solves math problems step by step.",
    "What is the sum of 17 and 25? Think carefully before answering.",
    "The answer is 42. Let me verify: 17 + 25 = 42.",
    "Use the calculator tool to compute the product of 12 and 13.",
    '{"name": "calculator", "arguments": {"expression": "12*13"}}',
    "The result of the tool call is 156, so the final answer is 156.",
    "Solve for x: 2x + 3 = 11. Subtract 3 from both sides, then divide by 2.",
    "x = 4 because 2 * 4 + 3 = 11.",
    "The weather tool returned sunny, 23 degrees in Paris.",
    "Héllo wörld — naïve café, 東京 and emoji 🙂 test.",
    "Tabs\tand\nnewlines\n\nare tokens too.",
]


def build_tokenizer(path):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok.add_tokens(MARKUP)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tok.save(path)
    return tok


def build_sp_tokenizer(path):
    """A Llama-style tokenizer: BPE with byte fallback, "▁" for spaces, Sequence decoder with Strip."""
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    specials = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=specials, show_progress=False)
    tok.train_from_iterator([c for c in CORPUS if not any(ord(ch) > 127 for ch in c)] * 4, trainer=trainer)
    tok.save(path)
    return tok


def chat(tok, messages):
    """Qwen-like chat template: returns the token ids of the rendered prompt."""
    text = ""
    for m in messages:
        text += "<|im_start|>" + m["role"] + "\n" + m["content"] + "<|im_end|>\n"
    text += "<|im_start|>assistant\n"
    return tok.encode(text).ids, text


def enc(tok, text):
    return tok.encode(text).ids


def make_sample(tok, rng, index, group, rollout_id, variant):
    """One Sample.to_dict() plus its full-resolution per-token values and its sidecar row."""
    sys_msg = {"role": "system", "content": "You are a helpful assistant that solves math problems step by step."}
    user = {"role": "user", "content": ["What is the sum of 17 and 25? Think carefully before answering.",
                                        "Use the calculator tool to compute the product of 12 and 13.",
                                        "Solve for x: 2x + 3 = 11."][index % 3]}
    prompt_msgs = [sys_msg, user]
    prompt_ids, prompt_text = chat(tok, prompt_msgs)
    resp_ids, loss_mask, versions = [], [], []
    messages = list(prompt_msgs)
    status = "completed"
    if variant == "tool":  # two assistant turns around one tool call; tool output is masked out
        a1 = ('<think>I should use the calculator.</think><tool_call>\n'
              '{"name": "calculator", "arguments": {"expression": "12*13"}}\n</tool_call><|im_end|>')
        ids = enc(tok, a1)
        resp_ids += ids
        loss_mask += [1] * len(ids)
        versions.append(str(rollout_id - 1))
        tool_text = "\n<|im_start|>tool\n156<|im_end|>\n<|im_start|>assistant\n"
        ids = enc(tok, tool_text)
        resp_ids += ids
        loss_mask += [0] * len(ids)
        a2 = "The result of the tool call is 156, so the final answer is 156.<|im_end|>"
        ids = enc(tok, a2)
        resp_ids += ids
        loss_mask += [1] * len(ids)
        versions.append(str(rollout_id))
        messages += [
            {"role": "assistant", "content": a1.replace("<|im_end|>", "")},
            {"role": "tool", "name": "calculator", "content": "156"},
            {"role": "assistant", "content": "The result of the tool call is 156, so the final answer is 156.",
             "reasoning_content": "The tool said 156."},
        ]
    elif variant == "openai_tools":
        a1 = "Let me look that up.<|im_end|>"
        ids = enc(tok, a1)
        resp_ids += ids
        loss_mask += [1] * len(ids)
        versions.append(str(rollout_id))
        messages += [{"role": "assistant", "content": "Let me look that up.",
                      "tool_calls": [{"id": "c1", "type": "function",
                                      "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
                     {"role": "tool", "name": "weather", "content": "sunny, 23 degrees"}]
    else:
        body = ["<think>17 + 25 = 42.</think>The answer is 42. Let me verify: 17 + 25 = 42.",
                "x = 4 because 2 * 4 + 3 = 11. Héllo wörld 🙂",
                "Tabs\tand\nnewlines\n\nare tokens too. The answer is 42."][index % 3]
        if variant == "truncated":
            body = body * 3
            status = "truncated"
        else:
            body += "<|im_end|>"
        ids = enc(tok, body)
        resp_ids += ids
        loss_mask += [1] * len(ids)
        versions.append(str(rollout_id))
        messages += [{"role": "assistant", "content": body}]
    R = len(resp_ids)
    tokens = prompt_ids + resp_ids
    # rollout log-probs as the engine reports them: Python floats
    rollout_lp = [round(-abs(rng.gauss(0.6, 0.5)), 6) for _ in range(R)]
    reward = float([1.0, 0.0][(index + group) % 2]) if variant != "zero_std" else 1.0
    sample = {
        "group_index": group, "index": index, "rollout_id": rollout_id,
        "prompt": prompt_msgs if index % 2 == 0 else prompt_text,
        "tokens": tokens, "multimodal_inputs": None, "multimodal_train_inputs": None,
        "response": tok.decode(resp_ids, skip_special_tokens=False), "response_length": R,
        "label": "42", "reward": reward, "loss_mask": loss_mask, "weight_versions": versions,
        "rollout_log_probs": rollout_lp, "rollout_routed_experts": None, "rollout_indexer_topk": None,
        "remove_sample": index % 7 == 6, "teacher_log_probs": None, "opd_reverse_kl": None,
        "status": status,
        "metadata": {"raw_reward": reward * 2 - 0.5, "round_number": len(versions)},
        "generate_function_path": "miles.rollout.sglang_rollout.generate", "train_metadata": None,
        "non_generation_time": round(0.01 * index, 3),
        "spec_info": {"spec_accept_token_num": 3 * index, "spec_draft_token_num": 4 * index + 4,
                      "spec_verify_ct": index, "completion_token_num": R},
        "prefix_cache_info": {"cached_tokens": len(prompt_ids) // 2, "total_prompt_tokens": len(prompt_ids)},
    }
    side = {"sample_index": index, "group_index": group, "status": status, "reward": reward,
            "prompt": sample["prompt"], "messages": messages}
    return sample, side


def cp_ranges(T, R, cp, qkv="thd", max_seq_len=None):
    """Per CP rank, the response-index ranges it holds, in stored order (miles-cp-layout.md)."""
    L = T if qkv == "thd" else max_seq_len
    cs = -(-L // (2 * cp))
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


FORWARD = ["log_probs", "ref_log_probs", "entropy"]  # PP: only the last stage has these
PER_TOKEN = ["rollout_log_probs", "log_probs", "ref_log_probs", "entropy", "advantages", "returns"]


def full_train_fields(samples, gen):
    """Full-resolution per-token train values per sample (float32, what the trainer computed)."""
    out = {}
    for s in samples:
        R = s["response_length"]
        lp = torch.tensor(s["rollout_log_probs"], dtype=torch.float32) + torch.randn(R, generator=gen) * 0.05
        adv = torch.full((R,), s["reward"] - 0.5, dtype=torch.float32) * torch.tensor(s["loss_mask"],
                                                                                       dtype=torch.float32)
        out[s["index"]] = {
            "rollout_log_probs": torch.tensor(s["rollout_log_probs"], dtype=torch.float32),
            "log_probs": lp.clamp(max=0.0),
            "ref_log_probs": (lp - 0.01).clamp(max=0.0),
            "entropy": torch.rand(R, generator=gen) * 2.0,
            "advantages": adv,
            "returns": adv * 0.9,
        }
    return out


def write_train(run, rollout_id, samples, full, dp, cp, tp, pp, qkv="thd", legacy=False, bf16_ref=False):
    """Shard like miles: samples split across DP ranks; per rank the CP slice; TP peers identical."""
    order = [s["index"] for s in samples]
    raw_reward = [s["metadata"]["raw_reward"] for s in samples]  # batch-global, rollout order
    shards = [samples[d::dp] for d in range(dp)]
    written = []
    for p in range(pp):
        for d in range(dp):
            for c in range(cp):
                for t in range(tp):
                    rank = t + tp * (c + cp * (d + dp * p))
                    rows = shards[d]
                    rd = {
                        "sample_indices": np.array([s["index"] for s in rows], dtype=np.int64) if rollout_id == 1
                        else [s["index"] for s in rows],
                        "tokens": [torch.tensor(s["tokens"], dtype=torch.long) for s in rows],
                        "loss_masks": [torch.tensor(s["loss_mask"], dtype=torch.int) for s in rows],
                        "response_lengths": [s["response_length"] for s in rows],
                        "total_lengths": [len(s["tokens"]) for s in rows],
                        "rewards": [s["reward"] - 0.5 for s in rows],
                        "raw_reward": raw_reward,
                        "truncated": [1 if s["status"] == "truncated" else 0 for s in rows],
                        "weight_versions": [s["weight_versions"] for s in rows],
                    }
                    max_seq = None
                    if qkv == "bshd":
                        max_seq = max(len(s["tokens"]) for s in rows) + 5
                        rd["max_seq_lens"] = [max_seq] * len(rows)
                    for f in PER_TOKEN:
                        if f in FORWARD and pp > 1 and p != pp - 1:
                            continue
                        parts = []
                        for s in rows:
                            v = full[s["index"]][f]
                            rr = cp_ranges(len(s["tokens"]), s["response_length"], cp, qkv, max_seq)[c]
                            parts.append(torch.cat([v[a:b] for a, b in rr]) if rr else v[:0])
                        if f == "ref_log_probs" and bf16_ref:
                            parts = [x.to(torch.bfloat16) for x in parts]
                        if f == "log_probs":
                            # views of one flat tensor, as torch.split of a batched output gives: shared storage
                            flat = torch.cat(parts) if parts else torch.zeros(0)
                            parts = list(torch.split(flat, [len(x) for x in parts]))
                        rd[f] = parts
                    obj = {"rollout_id": rollout_id, "rank": rank, "rollout_data": rd}
                    if not legacy:
                        obj.update(cp_rank=c, cp_size=cp, qkv_format=qkv)
                    path = os.path.join(run, "train_data", f"{rollout_id}_{rank}.pt")
                    torch.save(obj, path)
                    written.append(rank)
    return order


def as_list(t):
    return [float(x) for x in t.float().tolist()]


def expected_train(full, samples, bf16_ref=False, pp_missing=()):
    out = {}
    for s in samples:
        e = {}
        for f in PER_TOKEN:
            v = full[s["index"]][f]
            if f == "ref_log_probs" and bf16_ref:
                v = v.to(torch.bfloat16)
            e[f] = as_list(v)
        out[str(s["index"])] = e
    return out


def write_step(run, tok, rng, gen, rollout_id, n_groups, per_group, base_index, variants, evaluation=False):
    samples, sides = [], []
    i = 0
    for g in range(n_groups):
        for _ in range(per_group):
            idx = base_index + i
            var = variants[i % len(variants)]
            s, side = make_sample(tok, rng, idx, base_index // per_group + g, rollout_id, var)
            samples.append(s)
            sides.append(side)
            i += 1
    name = f"eval_{rollout_id}" if evaluation else str(rollout_id)
    if evaluation:
        # eval: {dataset: {"samples": [...]}} flattened into one list, as miles dumps it
        data = {"rollout_id": rollout_id, "metadata": {"datasets": ["gsm8k", "math"]}, "samples": samples}
    else:
        data = {"rollout_id": rollout_id, "metadata": {"rollout_time": 12.5}, "samples": samples}
    torch.save(data, os.path.join(run, "rollout_data", name + ".pt"))
    with open(os.path.join(run, "trajectory", name + ".jsonl"), "w") as f:
        for side in sides:
            if side["sample_index"] % 5 == 4:
                continue  # not every sample has messages: those fall back to tokens only
            f.write(json.dumps(side, ensure_ascii=False) + "\n")
    return samples, sides


def write_columns(run, rollout_id, samples, evaluation=False):
    name = f"rollout_eval_{rollout_id}" if evaluation else f"rollout_{rollout_id}"
    df = pl.DataFrame({
        "sample_index": pl.Series([s["index"] for s in samples], dtype=pl.Int32),
        "response_length": pl.Series([s["response_length"] for s in samples], dtype=pl.Int32),
        "total_length": pl.Series([len(s["tokens"]) for s in samples], dtype=pl.Int32),
        "tokens": pl.Series([s["tokens"] for s in samples], dtype=pl.List(pl.Int32)),
        "loss_mask": pl.Series([s["loss_mask"] for s in samples], dtype=pl.List(pl.Int8)),
        "rollout_log_probs": pl.Series([s["rollout_log_probs"] for s in samples], dtype=pl.List(pl.Float32)),
    })
    path = os.path.join(run, "dashboard_columns", name + ".parquet")
    df.write_parquet(path + ".tmp", row_group_size=8)
    os.replace(path + ".tmp", path)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/miles-dumps-pwned",))


def small(out):
    run = os.path.join(out, "run")
    for d in ["rollout_data", "train_data", "trajectory", "dashboard_columns", "tokenizer", "dashboard"]:
        os.makedirs(os.path.join(run, d), exist_ok=True)
    tok = build_tokenizer(os.path.join(run, "tokenizer", "tokenizer.json"))
    with open(os.path.join(run, "dashboard", "meta.json"), "w") as f:
        json.dump({"run_name": "dump-fixtures", "start_ts": 1764864000.0, "schema_version": 1}, f)
    rng = random.Random(9)
    gen = torch.Generator().manual_seed(9)
    expected = {"torch": torch.__version__, "steps": {}, "eval_steps": {}}

    variants = ["plain", "tool", "truncated", "openai_tools", "plain", "zero_std"]
    specs = {  # rollout_id: (groups, per_group, base_index, train layout)
        1: (6, 2, 0, dict(dp=2, cp=2, tp=2, pp=1)),
        2: (2, 2, 100, dict(dp=2, cp=1, tp=1, pp=2, bf16_ref=True)),
        3: (2, 2, 200, dict(dp=1, cp=2, tp=1, pp=1, legacy=True)),
        4: (2, 2, 300, dict(dp=1, cp=2, tp=1, pp=1, qkv="bshd")),
    }
    for rid, (ng, pg, base, layout) in specs.items():
        samples, sides = write_step(run, tok, rng, gen, rid, ng, pg, base, variants)
        full = full_train_fields(samples, gen)
        write_train(run, rid, samples, full, **layout)
        exp = {"layout": layout, "samples": {}}
        for s in samples:
            exp["samples"][str(s["index"])] = {
                "group_index": s["group_index"], "status": s["status"], "reward": s["reward"],
                "raw_reward": s["metadata"]["raw_reward"], "response_length": s["response_length"],
                "tokens": s["tokens"], "loss_mask": s["loss_mask"], "rollout_log_probs": s["rollout_log_probs"],
                "weight_versions": s["weight_versions"], "remove_sample": s["remove_sample"],
                "response": s["response"],
            }
        exp["train"] = expected_train(full, samples, bf16_ref=layout.get("bf16_ref", False))
        exp["sidecar"] = {str(x["sample_index"]): x for x in sides if x["sample_index"] % 5 != 4}
        expected["steps"][str(rid)] = exp
        if rid == 1:
            write_columns(run, rid, samples)
    ev, ev_sides = write_step(run, tok, rng, gen, 1, 2, 2, 1000, ["plain", "tool"], evaluation=True)
    expected["eval_steps"]["1"] = {"samples": {str(s["index"]): {"tokens": s["tokens"], "reward": s["reward"],
                                                                  "status": s["status"]} for s in ev}}

    # token text golden: what tokenizers' own decode gives per id and for whole sequences
    vocab = tok.get_vocab_size(with_added_tokens=True)
    expected["tokenizer"] = {
        "vocab_size": vocab,
        "per_id": [tok.decode([i], skip_special_tokens=False) for i in range(vocab)],
        "sequences": [{"ids": s["tokens"], "text": tok.decode(s["tokens"], skip_special_tokens=False)}
                      for s in expected_samples(expected)],
    }
    sp = build_sp_tokenizer(os.path.join(out, "tokenizer-sp.json"))
    texts = ["Héllo wörld — naïve café, 東京 and emoji 🙂 test.", " leading space and  double", "x = 4"]
    sp_ids = [sp.encode(t).ids for t in texts]
    n = sp.get_vocab_size(with_added_tokens=True)
    expected["tokenizer_sp"] = {
        "vocab_size": n,
        "per_id": [sp.decode([i], skip_special_tokens=False) for i in range(n)],
        "sequences": [{"ids": ids, "text": sp.decode(ids, skip_special_tokens=False)} for ids in sp_ids],
    }
    torch.save({"samples": [Evil()]}, os.path.join(out, "evil.pt"))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def expected_samples(expected):
    out = []
    for st in expected["steps"].values():
        out += list(st["samples"].values())
    return out[:6]


def big(out, n=256, length=8192, cp=2, tp=2, dp=4):
    """A bench-size step: n samples of `length` tokens (prompt 512), CP/TP-sharded train dumps, real torch."""
    run = out
    for d in ["rollout_data", "train_data", "dashboard"]:
        os.makedirs(os.path.join(run, d), exist_ok=True)
    with open(os.path.join(run, "dashboard", "meta.json"), "w") as f:
        json.dump({"run_name": "dump-bench", "start_ts": 1764864000.0, "schema_version": 1}, f)
    rng = np.random.default_rng(1)
    P = 512
    samples = []
    for i in range(n):
        R = length - P
        tokens = rng.integers(0, 150000, size=length).tolist()
        samples.append({
            "group_index": i // 8, "index": i, "rollout_id": 1, "prompt": "p" * 200, "tokens": tokens,
            "response": "r" * 2000, "response_length": R, "reward": float(i % 2), "loss_mask": [1] * R,
            "weight_versions": ["0", "1"] if i % 3 == 0 else ["1"],
            "rollout_log_probs": (-rng.random(R)).tolist(), "status": "completed", "remove_sample": False,
            "metadata": {"raw_reward": float(i % 2)}, "non_generation_time": 0.0,
        })
    torch.save({"rollout_id": 1, "metadata": {}, "samples": samples}, os.path.join(run, "rollout_data", "1.pt"))
    gen = torch.Generator().manual_seed(1)
    full = full_train_fields(samples, gen)
    write_train(run, 1, samples, full, dp=dp, cp=cp, tp=tp, pp=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "dashboard", "dumps", "testdata"))
    ap.add_argument("--big", help="write a bench-size step into this directory instead")
    a = ap.parse_args()
    torch.manual_seed(0)
    if a.big:
        big(a.big)
        return
    small(a.out)


if __name__ == "__main__":
    main()
