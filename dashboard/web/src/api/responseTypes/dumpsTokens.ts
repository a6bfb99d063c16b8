// GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens?from&to&fields&buckets: a window [from, to) of a sample's
// token positions (0 = the first prompt token), or buckets summarizing a wide range.

import { arr, bool, nullable, num, obj, record, str, tuple, type Infer } from "../schema";

const column = arr(nullable(num));

export const dumpsTokensSchema = obj(
  {
    step: num,
    eval: bool,
    sample_index: num,
    total_length: num,
    prompt_length: num,
    response_length: num,
    from: num,
    to: num,
    token_ids: nullable(arr(num)),
    text: nullable(arr(str)),
    special: nullable(arr(bool)),
    loss_mask: nullable(column),
    /** Per-token fields (imp_ratio, entropy, advantages, lp_diff, …), null over the prompt and masked tokens. */
    fields: nullable(record(column)),
    buckets: nullable(
      obj({
        size: num,
        start: arr(num),
        /** Share of response positions with loss_mask > 0. */
        mask_frac: column,
        fields: record(obj({ min: column, max: column, mean: column })),
      }),
    ),
    /** [start, end) of each assistant turn (a loss_mask = 1 run). */
    turns: arr(tuple(num, num)),
    /** Why a requested field has no values. */
    missing: record(str),
    /** Which file each column was read from. */
    sources: record(str),
  },
  { tokenizer_note: str },
);
export type DumpsTokensResp = Infer<typeof dumpsTokensSchema>;
