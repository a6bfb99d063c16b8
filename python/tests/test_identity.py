"""Identity resolution: node, run id, rank, GPUs (NVML index + UUID) without nvidia-smi."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import unittest

import helpers  # noqa: F401

from miles_otel import identity
from miles_otel.identity import DeviceTable, PhaseIdentity, parse_visible, resolve_gpus

TABLE = DeviceTable([f"GPU-{i}{i}{i}{i}-aaaa" for i in range(8)], "test")


class ParseVisibleTest(unittest.TestCase):
    def test_forms(self):
        self.assertIsNone(parse_visible(None))
        self.assertEqual(parse_visible(""), [])
        self.assertEqual(parse_visible("-1"), [])
        self.assertEqual(parse_visible("3, 5"), ["3", "5"])
        self.assertEqual(parse_visible("2,-1,4"), ["2"], "CUDA stops at the first invalid index")
        self.assertEqual(parse_visible("GPU-abc,1"), ["GPU-abc", "1"])


class ResolveGpusTest(unittest.TestCase):
    def test_ray_train_actor_with_one_gpu(self):
        self.assertEqual(resolve_gpus("train", {"CUDA_VISIBLE_DEVICES": "5"}, TABLE), ([5], ["GPU-5555-aaaa"]))

    def test_ray_actor_without_gpus(self):
        self.assertEqual(resolve_gpus("rollout_manager", {"CUDA_VISIBLE_DEVICES": ""}, TABLE), ([], []))

    def test_cpu_process_without_cuda_env(self):
        self.assertEqual(resolve_gpus("rollout_manager", {}, TABLE), ([], []))

    def test_torch_current_device_indexes_the_visible_list(self):
        env = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
        self.assertEqual(resolve_gpus("train", env, TABLE, cuda_device=2), ([6], ["GPU-6666-aaaa"]))

    def test_local_rank_narrows_a_multi_gpu_view(self):
        env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "LOCAL_RANK": "3"}
        self.assertEqual(resolve_gpus("train", env, TABLE), ([3], ["GPU-3333-aaaa"]))
        self.assertEqual(resolve_gpus("train", {"LOCAL_RANK": "2"}, TABLE), ([2], ["GPU-2222-aaaa"]))

    def test_uuid_entries_are_placed_on_their_nvml_index(self):
        env = {"CUDA_VISIBLE_DEVICES": "GPU-7777-aaaa,GPU-1111"}  # full UUID and a unique prefix
        self.assertEqual(resolve_gpus("rollout", env, TABLE), ([7, 1], ["GPU-7777-aaaa", "GPU-1111-aaaa"]))

    def test_unknown_uuid_and_mig_are_skipped(self):
        env = {"CUDA_VISIBLE_DEVICES": "GPU-ffff,MIG-1234,2"}
        self.assertEqual(resolve_gpus("rollout", env, TABLE), ([2], ["GPU-2222-aaaa"]))

    def test_without_a_device_table_indices_stay_and_uuids_are_unknown(self):
        self.assertEqual(resolve_gpus("train", {"CUDA_VISIBLE_DEVICES": "3"}, None), ([3], [""]))
        self.assertEqual(resolve_gpus("train", {"CUDA_VISIBLE_DEVICES": "GPU-3333"}, None), ([], []))


class ProcTableTest(unittest.TestCase):
    def test_procfs_table_orders_by_pci_bus_id(self):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        for bus, uuid in [("0000:9a:00.0", "GPU-second"), ("0000:18:00.0", "GPU-first"), ("0000:DB:00.0", "GPU-third")]:
            os.makedirs(os.path.join(root, bus))
            with open(os.path.join(root, bus, "information"), "w") as f:
                f.write(f"Model: \t\t NVIDIA H200\nIRQ: \t\t 42\nGPU UUID: \t {uuid}\nBus Location: \t {bus}\n")
        t = identity.proc_table(root)
        self.assertEqual(t.uuids, ["GPU-first", "GPU-second", "GPU-third"])
        self.assertEqual(t.source, "procfs")
        self.assertEqual(t.index_of("gpu-SECOND"), 1)

    def test_missing_procfs_and_library(self):
        self.assertIsNone(identity.proc_table("/nonexistent/path"))
        self.assertIsNone(identity.nvml_table("libdoes-not-exist.so.1"))


class PhaseIdentityTest(unittest.TestCase):
    def test_train_rank_is_re_resolved_until_known_then_fixed(self):
        now = [0.0]
        torch_state = [(None, None)]
        env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
        pid = PhaseIdentity("train", env=env, table_fn=lambda: TABLE, torch_fn=lambda: torch_state[0],
                            clock=lambda: now[0], retry_s=1.0)
        a = pid.attrs()
        self.assertEqual((a["miles.rank"], a["miles.gpu.ids"]), (-1, list(range(8))))
        now[0] = 0.5
        pid.attrs()
        self.assertEqual(pid.resolutions, 1, "re-resolution is rate limited")
        torch_state[0] = (5, 5)  # torch.distributed initialised, device set
        now[0] = 1.5
        a = pid.attrs()
        self.assertEqual(a, {"miles.role": "train", "miles.rank": 5, "miles.gpu.ids": [5],
                             "miles.gpu.uuids": ["GPU-5555-aaaa"]})
        now[0] = 100.0
        pid.attrs()
        self.assertEqual(pid.resolutions, 2, "fixed once rank and device are known")

    def test_rank_from_torchrun_env(self):
        pid = PhaseIdentity("train", env={"RANK": "12", "CUDA_VISIBLE_DEVICES": "4"}, table_fn=lambda: TABLE,
                            torch_fn=lambda: (None, None))
        self.assertEqual(pid.attrs()["miles.rank"], 12)

    def test_rollout_manager_has_no_rank(self):
        pid = PhaseIdentity("rollout_manager", env={"RANK": "3", "CUDA_VISIBLE_DEVICES": ""},
                            table_fn=lambda: None, torch_fn=lambda: (0, None))
        self.assertEqual(pid.attrs(), {"miles.role": "rollout_manager", "miles.rank": -1, "miles.gpu.ids": []})

    def test_explicit_gpus_get_uuids_from_the_table(self):
        pid = PhaseIdentity("train", rank=0, gpus=[6], env={}, table_fn=lambda: TABLE, torch_fn=lambda: (None, None))
        self.assertEqual(pid.attrs()["miles.gpu.uuids"], ["GPU-6666-aaaa"])

    def test_unknown_uuids_are_omitted(self):
        pid = PhaseIdentity("train", rank=0, gpus=[6], env={}, table_fn=lambda: None, torch_fn=lambda: (None, None))
        self.assertNotIn("miles.gpu.uuids", pid.attrs())

    def test_torch_state_reads_an_imported_torch_only(self):
        import sys
        import types

        fake = types.ModuleType("torch")
        fake.distributed = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                                 get_rank=lambda: 9)
        fake.cuda = types.SimpleNamespace(is_initialized=lambda: True, current_device=lambda: 2)
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake
        try:
            self.assertEqual(identity.torch_state(), (9, 2))
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved


class NodeAndRunTest(unittest.TestCase):
    def test_node_defaults_to_hostname_and_is_overridable(self):
        self.assertEqual(identity.node_name({}), socket.gethostname())
        self.assertEqual(identity.node_name({"MILES_NODE": "n7"}), "n7")

    def test_run_id(self):
        self.assertEqual(identity.run_id({"MILES_RUN_ID": "abc", "MILES_RUN_DIR": "/x/y"}), "abc")
        self.assertEqual(identity.run_id({"MILES_RUN_DIR": "/runs/qwen-grpo-3/"}), "qwen-grpo-3")
        self.assertIsNone(identity.run_id({}))


if __name__ == "__main__":
    unittest.main()
