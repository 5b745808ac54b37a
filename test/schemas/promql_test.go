// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package schemas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unionMembers are the members of the API's union types the alarms use,
// by union: the JSON key is the member's name (EvaluationCriteria's
// "PromQLCriteria").
var unionMembers = map[reflect.Type][]reflect.Type{
	reflect.TypeFor[types.EvaluationCriteria](): {reflect.TypeFor[types.EvaluationCriteriaMemberPromQLCriteria]()},
}

// decodeStrict fills v (a pointer) from JSON the way the API's shapes name
// their members, failing on a member the shape does not have.
func decodeStrict(raw any, v reflect.Value, where string) error {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return decodeStrict(raw, v.Elem(), where)
	case reflect.Interface:
		obj, ok := raw.(map[string]any)
		if !ok || len(obj) != 1 {
			return fmt.Errorf("%s: want an object with one member of %s", where, v.Type().Name())
		}
		for key, val := range obj {
			for _, m := range unionMembers[v.Type()] {
				if strings.TrimPrefix(m.Name(), v.Type().Name()+"Member") == key {
					member := reflect.New(m)
					if err := decodeStrict(val, member.Elem().FieldByName("Value"), where+"."+key); err != nil {
						return err
					}
					v.Set(member)
					return nil
				}
			}
			return fmt.Errorf("%s: %s has no member %s", where, v.Type().Name(), key)
		}
	case reflect.Struct:
		obj, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object", where)
		}
		for key, val := range obj {
			f, ok := v.Type().FieldByName(key)
			if !ok || !f.IsExported() {
				return fmt.Errorf("%s: %s has no member %s", where, v.Type().Name(), key)
			}
			if err := decodeStrict(val, v.FieldByIndex(f.Index), where+"."+key); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("%s: want a list", where)
		}
		v.Set(reflect.MakeSlice(v.Type(), len(list), len(list)))
		for i, item := range list {
			if err := decodeStrict(item, v.Index(i), fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		b, err := json.Marshal(raw)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, v.Addr().Interface()); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		return nil
	}
	return nil
}

var errValidated = errors.New("validated and serialized, not sent")

// putMetricAlarm decodes a PutMetricAlarm request body and hands it to the
// AWS SDK's client, which validates it (required members, unions) and
// serializes it; it is stopped before it would be signed and sent.
func putMetricAlarm(t *testing.T, body []byte) error {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		return err
	}
	var in cloudwatch.PutMetricAlarmInput
	if err := decodeStrict(raw, reflect.ValueOf(&in).Elem(), "PutMetricAlarm"); err != nil {
		return err
	}
	client := cloudwatch.New(cloudwatch.Options{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSCHEMAS000000001", "schemasTestSecret", ""),
	}, func(o *cloudwatch.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("stopBeforeSend",
				func(context.Context, middleware.FinalizeInput, middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, errValidated
				}), middleware.Before)
		})
	})
	_, err := client.PutMetricAlarm(context.Background(), &in)
	if errors.Is(err, errValidated) {
		return nil
	}
	if err == nil {
		return errors.New("the request was sent")
	}
	return err
}

// TestPromQLAlarmsAgainstTheAPI: every PutMetricAlarm request in
// deploy/cloudwatch/promql-alarms names only members the CloudWatch API
// (the AWS SDK's model, aws-sdk-go-v2/service/cloudwatch as pinned in
// go.mod) has, and passes the SDK's validation.
func TestPromQLAlarmsAgainstTheAPI(t *testing.T) {
	files, err := filepath.Glob(deployFile("cloudwatch/promql-alarms/*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NoError(t, putMetricAlarm(t, b), "%s", filepath.Base(f))
	}
}

// TestPromQLAlarmCheckReportsBrokenInputs: a misnamed member, a wrong
// union member and a missing required member are each reported.
func TestPromQLAlarmCheckReportsBrokenInputs(t *testing.T) {
	files, err := filepath.Glob(deployFile("cloudwatch/promql-alarms/*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	for _, tc := range []struct{ old, new, want string }{
		{`"PendingPeriod"`, `"PendingPeriods"`, "AlarmPromQLCriteria has no member PendingPeriods"},
		{`"PromQLCriteria"`, `"PromQLCriterion"`, "EvaluationCriteria has no member PromQLCriterion"},
		{`"AlarmName"`, `"AlarmNames"`, "has no member AlarmNames"},
		{`"Query"`, `"_comment"`, "has no member _comment"},
	} {
		require.Contains(t, string(b), tc.old)
		err := putMetricAlarm(t, []byte(strings.Replace(string(b), tc.old, tc.new, 1)))
		require.Error(t, err, "%s renamed", tc.old)
		assert.Contains(t, err.Error(), tc.want)
	}
	// Valid members, a required one left out: the SDK's own validation.
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	delete(raw, "AlarmName")
	nameless, err := json.Marshal(raw)
	require.NoError(t, err)
	err = putMetricAlarm(t, nameless)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "AlarmName")
}
