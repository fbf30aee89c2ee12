package record

import "github.com/writhq/writ"

// PinParams returns the record's params field for the effective values
// (pack.EffectiveParams) and the change record in force (set, "" for
// none): values with their canonical digest. It returns nil for nil
// values (a pack that declares no parameter).
func PinParams(values map[string]any, set string) (*writ.ParamsPin, error) {
	if values == nil {
		return nil, nil
	}
	d, err := CanonicalDigest(values)
	if err != nil {
		return nil, err
	}
	return &writ.ParamsPin{Digest: d, Values: values, Set: set}, nil
}
