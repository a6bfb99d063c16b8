package dumps

import (
	"math"
	"math/big"
	"strconv"
)

// Helpers that read decoded pickle values leniently: a missing key or an unexpected type reads as absent.

func fields(v any) *Dict {
	switch x := v.(type) {
	case *Dict:
		return x
	case *Object:
		return x.State
	}
	return nil
}

func get(d *Dict, k string) any {
	v, _ := d.Get(k)
	return v
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, true
	case *NDArray: // a 0-d or 1-element numpy array
		if len(x.Data) == x.DType.Size() && x.DType != DTUnknown {
			return toFloat(scalarAt(x.Data, x.DType, 0))
		}
	}
	return 0, false
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case bool:
		return asInt(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case *NDArray:
		if f, ok := toFloat(x); ok {
			return toInt(f)
		}
	}
	return 0, false
}

func toBool(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	}
	return false
}

func toString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

func items(v any) []any {
	switch x := v.(type) {
	case *List:
		return x.Items
	case Tuple:
		return x
	case *NDArray:
		if x.Objects != nil {
			return x.Objects
		}
		if x.DType == DTUnknown || len(x.Shape) != 1 {
			return nil
		}
		out := make([]any, x.Shape[0])
		for i := range out {
			out[i] = scalarAt(x.Data, x.DType, i)
		}
		return out
	}
	return nil
}

func ptrF(f float64, ok bool) *float64 {
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}
