"""Names from docs/semconv.md (the contract); mirrors internal/semconv/semconv.go. Tests check each is documented."""

# §1 resource attributes
SERVICE_NAME = "service.name"
SERVICE_INSTANCE_ID = "service.instance.id"
HOST_NAME = "host.name"
RUN_ID = "miles.run.id"
PROCESS_PID = "process.pid"

SERVICE_TRAINER = "miles-trainer"
SERVICE_ROLLOUT = "miles-rollout"

# span type discriminator and its values
SPAN_TYPE = "miles.span.type"
SPAN_TYPE_PHASE = "phase"
SPAN_TYPE_ATTEMPT = "attempt"
SPAN_TYPE_QUEUE = "queue"
SPAN_TYPE_GENERATE = "generate"
SPAN_TYPE_TOOL = "tool"
SPAN_TYPE_CONSUME = "consume"
SPAN_TYPE_STEP_CONSUME = "step_consume"
SPAN_TYPE_WEIGHT_UPDATE = "weight_update"

# §3 span names
SPAN_ATTEMPT = "miles.attempt"
SPAN_QUEUE = "miles.queue"
SPAN_GENERATE = "miles.generate"
SPAN_TOOL = "miles.tool"
SPAN_CONSUME = "miles.consume"
SPAN_STEP_CONSUME = "miles.step.consume"
SPAN_WEIGHT_UPDATE = "miles.weight_update"

# §2 phase attributes
PHASE_NAME = "miles.phase.name"
PHASE_PARENT = "miles.phase.parent"
ROLE = "miles.role"
RANK = "miles.rank"
GPU_IDS = "miles.gpu.ids"
GPU_UUIDS = "miles.gpu.uuids"
STEP = "miles.step"

ROLE_TRAIN = "train"
ROLE_ROLLOUT_MANAGER = "rollout_manager"
ROLE_ROLLOUT = "rollout"

# §3 trajectory attributes
SAMPLE_INDEX = "miles.sample.index"
GROUP_INDEX = "miles.group.index"
ATTEMPT = "miles.attempt"
SAMPLE_STATUS = "miles.sample.status"
TURN = "miles.turn"
WEIGHT_VERSION = "miles.weight.version"
ENGINE_ADDR = "miles.engine.addr"
ENGINE_RID = "miles.engine.rid"
TOKENS_PROMPT = "miles.tokens.prompt"
TOKENS_COMPLETION = "miles.tokens.completion"
FINISH_REASON = "miles.finish_reason"
TOOL_CALLS = "miles.tool.calls"
TOOL_NAMES = "miles.tool.names"
BATCH_SIZE = "miles.batch.size"

# log events
EVENT_NAME_ATTR = "event.name"
EVENT_PHASE_START = "miles.phase.start"
EVENT_TOPOLOGY = "miles.topology"
EVENT_RUN_CONFIG = "miles.run_config"

# §4 step metrics
STEP_METRICS_SCOPE = "miles.step_metrics"
STEP_KEY = "miles.step_key"

# environment variables read by the emitter (docs/semconv.md §1, §9; docs/python.md)
ENV_ENDPOINT = "MILES_OTLP_ENDPOINT"
ENV_NODE = "MILES_NODE"
ENV_RUN_ID = "MILES_RUN_ID"
ENV_RUN_DIR = "MILES_RUN_DIR"
ENV_SGLANG_TARGETS = "MILES_SGLANG_TARGETS"
