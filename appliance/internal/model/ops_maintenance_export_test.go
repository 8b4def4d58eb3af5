package model

// SetMaintenanceHook sets a function run between a maintenance decision
// and its transaction (tests use it to race the decision).
func SetMaintenanceHook(f func()) { maintenanceHook = f }
