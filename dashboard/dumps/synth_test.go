package dumps_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// pickler writes pickle protocol 2 the way CPython's Pickler does for the shapes torch.save produces: memoized
// containers, batched APPENDS/SETITEMS of 1000, the smallest int opcode, BINFLOAT, BINUNICODE.
type pickler struct {
	b    bytes.Buffer
	memo uint32
}

func (p *pickler) put() {
	if m := p.memo; m < 256 {
		p.b.WriteByte('q')
		p.b.WriteByte(byte(m))
	} else {
		p.b.WriteByte('r')
		_ = binary.Write(&p.b, binary.LittleEndian, m)
	}
	p.memo++
}

func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		p.b.WriteByte('K')
		p.b.WriteByte(byte(v))
	case v >= 0 && v < 65536:
		p.b.WriteByte('M')
		_ = binary.Write(&p.b, binary.LittleEndian, uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.b.WriteByte('J')
		_ = binary.Write(&p.b, binary.LittleEndian, int32(v))
	default:
		p.b.WriteByte(0x8a)
		p.b.WriteByte(8)
		_ = binary.Write(&p.b, binary.LittleEndian, v)
	}
}

func (p *pickler) float(v float64) {
	p.b.WriteByte('G')
	_ = binary.Write(&p.b, binary.BigEndian, math.Float64bits(v))
}

func (p *pickler) str(s string) {
	n := len(s)
	if n > math.MaxUint32 {
		panic("pickler: string too long for BINUNICODE")
	}
	p.b.WriteByte('X')
	_ = binary.Write(&p.b, binary.LittleEndian, uint32(n))
	p.b.WriteString(s)
	p.put()
}

func (p *pickler) global(mod, name string) {
	p.b.WriteString("c" + mod + "\n" + name + "\n")
	p.put()
}

// list writes a list of n items produced by item(i), batched like CPython.
func (p *pickler) list(n int, item func(i int)) {
	p.b.WriteByte(']')
	p.put()
	for lo := 0; lo < n; lo += 1000 {
		hi := min(lo+1000, n)
		if hi-lo == 1 {
			item(lo)
			p.b.WriteByte('a')
			continue
		}
		p.b.WriteByte('(')
		for i := lo; i < hi; i++ {
			item(i)
		}
		p.b.WriteByte('e')
	}
}

// dict writes {keys[i]: val(i)}.
func (p *pickler) dict(keys []string, val func(i int)) {
	p.b.WriteByte('}')
	p.put()
	if len(keys) == 0 {
		return
	}
	p.b.WriteByte('(')
	for i, k := range keys {
		p.str(k)
		val(i)
	}
	p.b.WriteByte('u')
}

// torchWriter collects storages and writes a torch.save zip.
type torchWriter struct {
	p        pickler
	storages [][]byte
}

// tensor writes a 1-D float32 or int64 tensor as its own storage (what torch.save does for a list of tensors).
func (w *torchWriter) tensor(data []byte, storage string, n int) {
	w.p.global("torch._utils", "_rebuild_tensor_v2")
	w.p.b.WriteByte('(')
	w.p.b.WriteByte('(')
	w.p.str("storage")
	w.p.global("torch", storage)
	w.p.str(strconv.Itoa(len(w.storages)))
	w.p.str("cpu")
	w.p.int(int64(n))
	w.p.b.WriteByte('t')
	w.p.put()
	w.p.b.WriteByte('Q')
	w.p.int(0)
	w.p.int(int64(n))
	w.p.b.WriteByte(0x85)
	w.p.put()
	w.p.int(1)
	w.p.b.WriteByte(0x85)
	w.p.put()
	w.p.b.WriteByte(0x89)
	w.p.global("collections", "OrderedDict")
	w.p.b.WriteByte(')')
	w.p.b.WriteByte('R')
	w.p.put()
	w.p.b.WriteByte('t')
	w.p.put()
	w.p.b.WriteByte('R')
	w.p.put()
	w.storages = append(w.storages, data)
}

func (w *torchWriter) save(path string) error {
	w.p.b.WriteByte('.')
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	arch := "archive/"
	put := func(name string, b []byte) error {
		zf, err := zw.CreateHeader(&zip.FileHeader{Name: arch + name, Method: zip.Store})
		if err != nil {
			return err
		}
		_, err = zf.Write(b)
		return err
	}
	body := append([]byte{0x80, 2}, w.p.b.Bytes()...)
	if err := put("data.pkl", body); err != nil {
		return err
	}
	for i, s := range w.storages {
		if err := put("data/"+strconv.Itoa(i), s); err != nil {
			return err
		}
	}
	if err := put("version", []byte("3\n")); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i64bytes(v []int64, size int) []byte {
	var b bytes.Buffer
	for _, x := range v {
		if size == 8 {
			_ = binary.Write(&b, binary.LittleEndian, x)
			continue
		}
		if x < math.MinInt32 || x > math.MaxInt32 {
			panic("i64bytes: value out of int32 range")
		}
		_ = binary.Write(&b, binary.LittleEndian, int32(x))
	}
	return b.Bytes()
}

// synthSample is one sample's full values.
type synthSample struct {
	tokens  []int64
	resp    int
	lp      []float64 // rollout log-probs (Python floats in the rollout dump)
	train   map[string][]float32
	reward  float64
	group   int
	version []string
}

// cpSlice cuts a response field for rank r of cp, the layout cp.go reassembles.
func cpSlice(v []float32, total, resp, cp, r int) []float32 {
	cs := (total + 2*cp - 1) / (2 * cp)
	p1 := total - resp - 1
	var out []float32
	for _, c := range [2][2]int{{r * cs, (r + 1) * cs}, {(2*cp - r - 1) * cs, (2*cp - r) * cs}} {
		s, e := max(c[0], p1), min(c[1], total-1)
		if s < e {
			out = append(out, v[s-p1:e-p1]...)
		}
	}
	return out
}

var trainFields = []string{"rollout_log_probs", "log_probs", "ref_log_probs", "entropy", "advantages", "returns"}

// writeStep writes rollout_data/1.pt and train_data/1_<rank>.pt for n samples of length tokens (prompt 512),
// ranks = dp × cp × tp (TP fastest), and dashboard/meta.json so the directory opens as a run. Every third
// sample was generated by weight versions "0" then "1", the others by "1".
func writeStep(dir string, n, length, dp, cp, tp int) ([]*synthSample, error) {
	return writeStepVersions(dir, n, length, dp, cp, tp, func(i int) []string {
		if i%3 == 0 {
			return []string{"0", "1"}
		}
		return []string{"1"}
	})
}

// writeStepVersions is writeStep with the weight versions of sample i (its Sample.weight_versions, one string
// per engine call, as miles writes them) given by versions(i).
func writeStepVersions(dir string, n, length, dp, cp, tp int, versions func(i int) []string) ([]*synthSample, error) {
	for _, d := range []string{"rollout_data", "train_data", "dashboard"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard", "meta.json"),
		[]byte(`{"run_name":"dump-bench","schema_version":1}`), 0o644); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	P := min(512, length/2)
	samples := make([]*synthSample, n)
	for i := range samples {
		s := &synthSample{resp: length - P, group: i / 8, reward: float64(i % 2), train: map[string][]float32{}}
		s.tokens = make([]int64, length)
		for k := range s.tokens {
			s.tokens[k] = rng.Int64N(150000)
		}
		s.lp = make([]float64, s.resp)
		for k := range s.lp {
			s.lp[k] = -rng.Float64() * 3
		}
		for _, f := range trainFields {
			v := make([]float32, s.resp)
			for k := range v {
				if f == "rollout_log_probs" {
					v[k] = float32(s.lp[k])
				} else {
					v[k] = rng.Float32() - 0.5
				}
			}
			s.train[f] = v
		}
		s.version = versions(i)
		samples[i] = s
	}
	// rollout dump: Python lists inside the pickle
	var w torchWriter
	keys := []string{"rollout_id", "metadata", "samples"}
	w.p.dict(keys, func(k int) {
		switch k {
		case 0:
			w.p.int(1)
		case 1:
			w.p.dict(nil, nil)
		case 2:
			w.p.list(n, func(i int) {
				s := samples[i]
				sk := []string{
					"group_index", "index", "rollout_id", "prompt", "tokens", "response", "response_length",
					"reward", "loss_mask", "weight_versions", "rollout_log_probs", "status", "remove_sample", "metadata",
				}
				w.p.dict(sk, func(j int) {
					switch sk[j] {
					case "group_index":
						w.p.int(int64(s.group))
					case "index":
						w.p.int(int64(i))
					case "rollout_id":
						w.p.int(1)
					case "prompt":
						w.p.str(fmt.Sprintf("prompt %d ", i) + string(bytes.Repeat([]byte("p"), 2000)))
					case "tokens":
						w.p.list(len(s.tokens), func(k int) { w.p.int(s.tokens[k]) })
					case "response":
						w.p.str(fmt.Sprintf("response %d ", i) + string(bytes.Repeat([]byte("r"), 30000)))
					case "response_length":
						w.p.int(int64(s.resp))
					case "reward":
						w.p.float(s.reward)
					case "loss_mask":
						w.p.list(s.resp, func(int) { w.p.int(1) })
					case "weight_versions":
						w.p.list(len(s.version), func(k int) { w.p.str(s.version[k]) })
					case "rollout_log_probs":
						w.p.list(s.resp, func(k int) { w.p.float(s.lp[k]) })
					case "status":
						w.p.str("completed")
					case "remove_sample":
						w.p.b.WriteByte(0x89)
					case "metadata":
						w.p.dict([]string{"raw_reward"}, func(int) { w.p.float(s.reward) })
					}
				})
			})
		}
	})
	if err := w.save(filepath.Join(dir, "rollout_data", "1.pt")); err != nil {
		return nil, err
	}
	// train shards: per rank its DP share, per-token fields CP-sliced, TP peers identical
	for d := range dp {
		var rows []int
		for i := d; i < n; i += dp {
			rows = append(rows, i)
		}
		for c := range cp {
			for t := range tp {
				rank := t + tp*(c+cp*d)
				var w torchWriter
				top := []string{"rollout_id", "rank", "rollout_data", "cp_rank", "cp_size", "qkv_format"}
				w.p.dict(top, func(k int) {
					switch top[k] {
					case "rollout_id":
						w.p.int(1)
					case "rank":
						w.p.int(int64(rank))
					case "cp_rank":
						w.p.int(int64(c))
					case "cp_size":
						w.p.int(int64(cp))
					case "qkv_format":
						w.p.str("thd")
					case "rollout_data":
						rk := append([]string{
							"sample_indices", "tokens", "loss_masks", "response_lengths",
							"total_lengths", "rewards", "raw_reward", "truncated",
						}, trainFields...)
						w.p.dict(rk, func(j int) {
							switch rk[j] {
							case "sample_indices":
								w.p.list(len(rows), func(r int) { w.p.int(int64(rows[r])) })
							case "tokens":
								w.p.list(len(rows), func(r int) {
									s := samples[rows[r]]
									w.tensor(i64bytes(s.tokens, 8), "LongStorage", len(s.tokens))
								})
							case "loss_masks":
								w.p.list(len(rows), func(r int) {
									s := samples[rows[r]]
									ones := make([]int64, s.resp)
									for k := range ones {
										ones[k] = 1
									}
									w.tensor(i64bytes(ones, 4), "IntStorage", s.resp)
								})
							case "response_lengths":
								w.p.list(len(rows), func(r int) { w.p.int(int64(samples[rows[r]].resp)) })
							case "total_lengths":
								w.p.list(len(rows), func(r int) { w.p.int(int64(len(samples[rows[r]].tokens))) })
							case "rewards":
								w.p.list(len(rows), func(r int) { w.p.float(samples[rows[r]].reward - 0.5) })
							case "raw_reward":
								w.p.list(n, func(i int) { w.p.float(samples[i].reward) })
							case "truncated":
								w.p.list(len(rows), func(int) { w.p.int(0) })
							default:
								f := rk[j]
								w.p.list(len(rows), func(r int) {
									s := samples[rows[r]]
									sl := cpSlice(s.train[f], len(s.tokens), s.resp, cp, c)
									w.tensor(f32bytes(sl), "FloatStorage", len(sl))
								})
							}
						})
					}
				})
				if err := w.save(filepath.Join(dir, "train_data", fmt.Sprintf("1_%d.pt", rank))); err != nil {
					return nil, err
				}
			}
		}
	}
	return samples, nil
}
