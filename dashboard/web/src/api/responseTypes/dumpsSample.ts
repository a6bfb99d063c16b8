// GET /api/v1/dumps/steps/{id}/samples/{idx}[?eval=1]: the sample page: its table row, its GRPO group, the
// conversation from the trajectory sidecar (or the prompt and response text when there is none).

import { arr, bool, json, nullable, num, obj, oneOf, record, str, type Infer } from "../schema";
import type { Cell } from "./dumpsTable";

export const blockSchema = obj(
  { type: oneOf("text", "thinking", "tool_call") },
  {
    text: str,
    /** tool_call: the tool's name and its arguments (pretty-printed JSON, or the raw text when not JSON). */
    name: str,
    arguments: str,
    valid_json: bool,
  },
);
export type Block = Infer<typeof blockSchema>;

export const messageSchema = obj(
  {
    index: num,
    role: str,
    blocks: arr(blockSchema),
    /** System and tool messages start collapsed. */
    collapsed: bool,
  },
  { name: str },
);
export type Message = Infer<typeof messageSchema>;

export const conversationSchema = obj(
  {
    sample_index: num,
    group_index: nullable(num),
    reward: nullable(num),
    messages: arr(messageSchema),
    /** Assistant messages. */
    turns: num,
    tool_calls: num,
  },
  { status: str, prompt: json },
);
export type Conversation = Infer<typeof conversationSchema>;

export const dumpsSampleSchema = obj(
  {
    step: num,
    eval: bool,
    /** The sample's row of the samples table (every column). */
    sample: record(json),
    group: obj({
      group_index: num,
      samples: arr(num),
      position: num,
      prev: nullable(num),
      next: nullable(num),
      zero_std: bool,
    }),
    weight_versions: arr(json),
    label: json,
    conversation: nullable(conversationSchema),
  },
  {
    /** Why there is no conversation (no sidecar, no messages for this sample, unreadable). */
    conversation_note: str,
    prompt_text: str,
    response_text: str,
  },
);
/** The row's values are table cells. */
export type DumpsSampleResp = Omit<Infer<typeof dumpsSampleSchema>, "sample"> & { sample: Record<string, Cell> };
