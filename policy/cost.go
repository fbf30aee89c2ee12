package policy

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
)

// MaxInputBytes bounds the size of a check request's canonical JSON. The
// engine refuses larger requests before deciding, so no string, list or
// map a condition can see is larger than this.
const MaxInputBytes = 1 << 20

// inputBound sizes every variable-length value at most MaxInputBytes, so
// that a condition's worst-case cost can be estimated when it loads.
type inputBound struct{}

func (inputBound) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	return nil
}

func (inputBound) EstimateSize(cost.AstNode) *cost.SizeEstimate {
	return &cost.SizeEstimate{Min: 0, Max: MaxInputBytes}
}

// costBounded reports whether ast's worst case on any admissible input is
// within limit. Such a condition needs no run-time cost tracking; any
// other condition is compiled with a run-time cost limit.
func costBounded(env *cel.Env, ast *cel.Ast, limit uint64) (uint64, bool) {
	est, err := env.EstimateCost(ast, inputBound{})
	if err != nil {
		return 0, false
	}
	return est.Max, est.Max <= limit
}
