package testcluster

import "github.com/cairn-storage/cairn/appliance/internal/testlog"

// LogBuffer collects a cluster's log (Options.LogTo) while its daemons
// write it, for tests that check what was logged.
type LogBuffer = testlog.Buffer
