// GET /api/v1/dumps/steps/{id}/samples and …/groups: a table, columnar: the column names asked for (or all)
// and one array of values per column. The samples table's CSV form (format=csv) is not JSON.

import { arr, bool, nullable, num, obj, record, str, type Infer, type Schema } from "../schema";

export type Cell = number | string | boolean | null;

const cell: Schema<Cell> = {
  kind: "cell",
  check(v, p, e) {
    if (v !== null && typeof v !== "number" && typeof v !== "string" && typeof v !== "boolean") e.push(`${p}: want a table cell, got ${JSON.stringify(v)}`);
  },
};

export const samplesTableSchema = obj({
  step: num,
  eval: bool,
  /** The sort column and direction, and the page of matching rows (the query's, or their defaults). */
  sort: str,
  desc: bool,
  offset: num,
  limit: num,
  /** Samples of the step, and those matching the filters. */
  total: num,
  matched: num,
  columns: arr(str),
  data: record(arr(cell)),
});
export type SamplesTable = Infer<typeof samplesTableSchema>;

/** The groups table: one row per GRPO group; `samples` holds each group's sample indexes. */
export const groupsTableSchema = obj({
  columns: arr(str),
  data: obj({
    group_index: arr(num),
    n: arr(num),
    reward_mean: arr(nullable(num)),
    reward_std: arr(nullable(num)),
    response_length_mean: arr(num),
    truncated_frac: arr(num),
    zero_std: arr(bool),
    samples: arr(arr(num)),
  }),
});
export type GroupsTable = Infer<typeof groupsTableSchema>;
