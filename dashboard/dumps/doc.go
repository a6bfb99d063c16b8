// Package dumps reads the miles dump directories of a run for the dashboard's step and sample pages:
// rollout_data/<id>.pt and eval_<id>.pt (torch zip + pickle), train_data/<id>_<rank>.pt (per-rank shards),
// dashboard_columns/rollout_[eval_]<id>.parquet (per-token mirror), trajectory/[eval_]<id>.jsonl (conversation
// sidecar) and tokenizer/tokenizer.json. The endpoints that serve them and what each field means:
// docs/dashboard-api.md "Dumps"; the context-parallel layout of the train shards is described in cp.go.
//
//	.pt ──(archive.go: zip directory, stored records read in place)──▶ data.pkl
//	    ──(pickle.go + allowlist.go: data-only decoder, numeric lists kept as byte spans)──▶ values
//	    ──(rollout.go: Sample index │ train.go + cp.go: TP first-wins, PP last stage, CP slices per rank)──▶ Step
//	Step ──(tokens.go: point reads of one sample, windowed or bucketed │ summary.go: table, groups, tiles)──▶ API
//
// Safety. Pickles are never run: the decoder interprets opcodes into Go values and resolves GLOBALs against an
// allow-list (torch tensor rebuilds and storages, OrderedDict, numpy arrays/dtypes/scalars, bytes via
// _codecs.encode, the miles Sample record); REDUCE/NEWOBJ/BUILD on an allowed name run a Go constructor that
// validates its arguments. Any other callable fails the load with ForbiddenError naming it. We do not use
// github.com/nlpodyssey/gopickle: its class hook is as safe, but it boxes every list element, and a rollout
// step's per-token lists are millions of Python ints and floats; this decoder keeps them as spans of the pickle
// (re-decoded for one sample on demand), so indexing a 256 × 8k-token step holds ≈ 3 MB.
//
// Files being written. torch writes the zip directory last, so an unreadable file younger than Options.Settle
// is UnavailableError (retry), an older one FileCorruptError naming the file. A trailing partial sidecar line is
// skipped until complete. Steps are re-read when their files change.
//
// Memory and caches. At most Options.MaxOpenSteps steps stay open (LRU, closed when the last reader releases
// them). Per-token data is never resident. Step summaries are cached in memory and under Options.CacheDir;
// nothing is ever written into the run directory.
package dumps
