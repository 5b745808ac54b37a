// Copyright The otelcol-gpubuild Authors
// SPDX-License-Identifier: Apache-2.0

package cloudwatchtest

import (
	"net/http"
	"slices"
	"strings"
)

type fault uint8

const (
	noFault fault = iota
	dropFault
	authFault
	throttleFault
	serverErrorFault
)

// nextFault counts the request and picks what happens to it.
func (s *Server) nextFault(r *http.Request) (fault, Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests++
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.faultSeq++
	f, n := s.faults, s.faultSeq
	every := func(k int) bool { return k > 0 && n%k == 0 }
	switch {
	case len(f.AcceptedAccessKeys) > 0 && !slices.Contains(f.AcceptedAccessKeys, AccessKeyID(r)):
		s.stats.AuthErrors++
		return authFault, f
	case every(f.DropEvery):
		s.stats.Dropped++
		return dropFault, f
	case every(f.ThrottleEvery):
		s.stats.Throttled++
		return throttleFault, f
	case every(f.ServerErrorEvery):
		s.stats.ServerErrors++
		return serverErrorFault, f
	}
	return noFault, f
}

// AccessKeyID is the access key id a SigV4-signed request names in its
// Authorization header ("AWS4-HMAC-SHA256 Credential=AKID/date/region/...").
func AccessKeyID(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return key
}

// writeAuthError answers a refused key as CloudWatch does.
func writeAuthError(w http.ResponseWriter, code string) {
	if code == "" {
		code = "InvalidClientTokenId"
	}
	status := http.StatusForbidden
	switch code {
	case "ExpiredToken", "ExpiredTokenException", "RequestExpired":
		status = http.StatusBadRequest
	}
	writeError(w, status, code, code+";Sender", "The security token included in the request is invalid.")
}
