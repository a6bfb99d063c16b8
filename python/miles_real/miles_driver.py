"""A short GRPO run of the published miles (miles-rl 0.0.2) without a GPU, instrumented by the one switch
(``MILES_OTEL=1`` and the installed ``miles-otel`` wheel; no miles file edited, no glue line).

Real miles code: the argument parser (``get_miles_extra_args_provider``), ``RolloutManager`` as a Ray actor (its ``__init__`` in
``--debug-train-only`` mode, which starts no engine, then ``init_http_client`` as ``__init__`` calls it beside
the engines it would start; and ``generate``: the rollout function, data source, reward,
metrics logging, conversion to train data), ``sglang_rollout.generate_and_rm`` / ``generate`` and
``http_utils.post`` against a real sglang router (sgl-model-gateway) in front of fake sglang engines
(internal/fakesglang), ``Timer`` / ``timer`` / ``inverse_timer`` in the train ranks. What cannot run here:

- miles' train actors (``miles.ray.train_actor`` needs torch ≥ 2.x, Megatron and CUDA). Each train rank is a
  process that runs miles' real ``Timer`` phases in miles' order, with miles' seeding of ``random`` (alike on
  every rank of a pipeline stage), and rank 0 pushes the weight version to the engines through miles' own
  ``SGLangEngine`` as its updater does (pause generation, flush the cache, sglang's ``/update_weight_version``,
  continue) and reports it with ``miles_otel.weight_update`` — the call the instrumentation's ``update_weights``
  hook makes in a real train actor.
- sglang's engine-side modules miles imports at module level (sglang_engine_shim.py says which and why).

Usage: miles_driver.py --router 127.0.0.1:PORT --engines http://…,http://… --workdir DIR [--steps N]
Prints one JSON line per step ({"step": k, "samples": [...]}) and a last line {"done": true}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

# The sglang_* fields the rollout code reads, at sglang 0.5.23's defaults (its ServerArgs adds them in a real run).
SGLANG_DEFAULTS = {
    "sglang_dp_size": 1,
    "sglang_speculative_algorithm": None,
    "sglang_enable_deterministic_inference": False,
    "sglang_router_policy": "cache_aware",
}

# miles' phase names and nesting in a train rank's step (megatron actor: train → log_probs, actor_train with
# data_preprocess inside, then update_weights).
TRAIN_PHASES = (("log_probs", 0.05), ("actor_train", 0.12))


# A ChatML-shaped template: miles' multi-turn path tokenizes tool responses through it.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] or '' }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def engine_handles(engines: list[str]) -> list:
    """miles' own ``SGLangEngine`` for each running engine, as ``init`` leaves it for an external engine (its host,
    port and node rank): the object miles' weight updater calls on each engine actor."""
    sys.path.insert(0, HERE)
    import sglang_engine_shim

    sglang_engine_shim.install()
    from miles.backends.sglang_utils.sglang_engine import SGLangEngine

    handles = []
    for i, url in enumerate(engines):
        u = urllib.parse.urlsplit(url)
        e = SGLangEngine(argparse.Namespace(rollout_num_gpus_per_engine=1, num_gpus_per_node=1), rank=i)
        e.server_host, e.server_port, e.node_rank = u.hostname, u.port, 0
        handles.append(e)
    return handles


def push_version(handles: list, version: int) -> None:
    """What miles' weight updater does on the engines around an update (update_weight_utils): pause generation,
    flush the cache, load the new weights (here only their version: sglang's /update_weight_version), continue."""
    for e in handles:
        e.pause_generation()
    for e in handles:
        e.flush_cache()
    for e in handles:
        e.update_weight_version(str(version))
    for e in handles:
        e.continue_generation()


def train_rank(rank: int, engines: list[str]) -> None:
    """One train rank: reads "init" / "step k" / "stop" lines, runs miles' Timer phases for each step."""
    import random

    random.seed(1234)  # miles' _set_random_seed: args.seed + 100 * pp_rank, alike on every TP/DP/CP rank

    import miles_otel
    from miles.utils import train_metric_utils
    from miles.utils.timer import Timer, inverse_timer, timer

    perf_args = argparse.Namespace(wandb_always_use_train_step=False)
    version, handles = 0, None
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "stop":
            break
        step = int(cmd[1]) if len(cmd) > 1 else None
        if cmd[0] == "step":
            miles_otel.set_step(step)  # what the instrumentation's train(rollout_id, …) hook does
            # miles' actor.train: train_wait paused around the step under "train" (started again as it ends),
            # then log_perf_data (perf/step_time, perf/wait_time_ratio on rollout/step)
            with inverse_timer("train_wait"), timer("train"):
                for name, secs in TRAIN_PHASES:
                    with timer(name):
                        if name == "actor_train":
                            with timer("data_preprocess"):
                                time.sleep(0.01)
                            Timer().start("train_step")
                            with inverse_timer("train_step"):  # miles pauses a timer around a collective
                                time.sleep(0.005)
                            Timer().end("train_step")
                        time.sleep(secs)
            train_metric_utils.log_perf_data_raw(step, perf_args, rank == 0, None)
        if cmd[0] == "init":
            Timer().start("train_wait")  # the actor waits for its first batch
        if cmd[0] in ("init", "step"):
            if rank == 0 and handles is None:
                handles = engine_handles(engines)
            t0 = time.time()
            with timer("update_weights"):
                version += 1
                if rank == 0:
                    push_version(handles, version)
            if rank == 0:
                miles_otel.weight_update(version, t0, time.time(), step=step)
        miles_otel.flush(10)
        say({"rank": rank, "done": line.strip()})


def make_tokenizer(path: str) -> None:
    """A tiny word-level tokenizer in Hugging Face's format (AutoTokenizer loads it from the directory)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<pad>", "<eos>"] + [f"w{i}" for i in range(200)] + ["what", "is", "one", "plus", "two", "tok"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "pad_token": "<pad>",
                   "eos_token": "<eos>", "model_max_length": 4096, "chat_template": CHAT_TEMPLATE}, f)


def rollout_manager(opts) -> None:
    sys.path.insert(0, HERE)
    import sglang_engine_shim

    sglang_engine_shim.install()
    work = opts.workdir
    os.makedirs(work, exist_ok=True)
    tok_dir = os.path.join(work, "tokenizer")
    make_tokenizer(tok_dir)
    prompts = os.path.join(work, "prompts.jsonl")
    with open(prompts, "w") as f:
        for i in range(opts.prompts * (opts.steps + 1)):
            f.write(json.dumps({"prompt": f"what is one plus two w{i}", "label": "3"}) + "\n")
    n = opts.n_samples
    host, port = opts.router.rsplit(":", 1)

    import argparse as ap

    from miles.utils.arguments import get_miles_extra_args_provider

    parser = ap.ArgumentParser()
    get_miles_extra_args_provider()(parser)
    argv = [
        "--hf-checkpoint", tok_dir, "--prompt-data", prompts, "--input-key", "prompt", "--label-key", "label",
        "--rollout-batch-size", str(opts.prompts), "--n-samples-per-prompt", str(n),
        "--global-batch-size", str(opts.prompts * n), "--rollout-max-response-len", "8",
        "--rm-type", "math", "--rollout-num-gpus", "2", "--rollout-num-gpus-per-engine", "1",
        "--debug-train-only",
    ]
    if opts.multi_turn:  # miles' own multi-turn generate function with a tool (miles_real_tools.py)
        from miles.rollout.generate_hub import multi_turn

        multi_turn.generate.add_arguments(parser)
        argv += [
            "--custom-generate-function-path", "miles.rollout.generate_hub.multi_turn.generate",
            "--generate-max-turns", "3", "--generate-tool-call-parser", "qwen25",
            "--generate-tool-specs-path", "miles_real_tools.TOOL_SPECS",
            "--generate-execute-tool-function-path", "miles_real_tools.execute",
        ]
    args = parser.parse_args(argv)
    for k, v in SGLANG_DEFAULTS.items():
        if not hasattr(args, k):
            setattr(args, k, v)
    args.sglang_router_ip, args.sglang_router_port = host, int(port)
    args.rollout_global_dataset = True
    # miles_validate_args fills these from the parallel layout of a real launch
    args.over_sampling_batch_size = getattr(args, "over_sampling_batch_size", None) or args.rollout_batch_size

    import ray

    # The switch reaches Ray's worker processes through the job's runtime_env, as in a real launch
    # (docs/getting-started.md); here the engine-side sglang modules are replaced in every worker too.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False, runtime_env={
        "env_vars": {k: v for k, v in os.environ.items() if k.startswith(("MILES_", "HF_"))} | {"PYTHONPATH": HERE},
        "worker_process_setup_hook": "sglang_engine_shim.install",
    })
    from miles.ray.rollout import RolloutManager

    ranks = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--role", "train", "--rank", str(r), "--engines", opts.engines],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(opts.train_ranks), "LOCAL_RANK": "0",
                 "CUDA_VISIBLE_DEVICES": str(r)},
        )
        for r in range(opts.train_ranks)
    ]

    def train(cmd: str) -> None:
        for p in ranks:
            p.stdin.write(cmd + "\n")
            p.stdin.flush()
        for p in ranks:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"train rank exited during {cmd!r}")

    try:
        manager = RolloutManager.options(num_cpus=0, num_gpus=0).remote(args, None)
        ray.get(manager.set_train_parallel_config.remote({"dp_size": 1}))
        # __init__ in --debug-train-only starts no engine and so skips init_http_client; the engines here are the
        # test's, already behind the router: the HTTP client is made as __init__ makes it next to the servers.
        ray.get(manager.__ray_call__.remote(lambda self: __import__("miles.utils.http_utils").utils.http_utils.init_http_client(self.args)))
        train("init")  # miles pushes the initial weights before the loop: the engines hold version 1
        for step in range(opts.steps):
            ray.get(manager.generate.remote(step))  # the consume of this step's batch happens in here
            train(f"step {step}")
            say({"step": step})
    finally:
        for p in ranks:
            try:
                p.stdin.write("stop\n")
                p.stdin.close()
            except OSError:
                pass
        for p in ranks:
            p.wait(30)
    import miles_otel

    miles_otel.flush(10)
    status = ray.get(manager.__ray_call__.remote(lambda self: __import__("miles_otel.instrumentation").instrumentation.MilesInstrumentor.status()))
    ray.get(manager.__ray_call__.remote(lambda self: __import__("miles_otel").flush(10)))
    say({"done": True, "instrumentation": status})
    ray.shutdown()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--role", default="rollout_manager", choices=["rollout_manager", "train"])
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--router", default="")
    p.add_argument("--engines", default="")
    p.add_argument("--workdir", default="")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--n-samples", type=int, default=2)
    p.add_argument("--train-ranks", type=int, default=4)
    p.add_argument("--multi-turn", action="store_true")
    opts = p.parse_args()
    engines = [u for u in opts.engines.split(",") if u]
    if opts.role == "train":
        train_rank(opts.rank, engines)
    else:
        rollout_manager(opts)


if __name__ == "__main__":
    main()
