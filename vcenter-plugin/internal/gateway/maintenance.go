package gateway

// SDS maintenance as the engines take SDSs through it (the rolling
// maintenance one host or fault set at a time, the rolling upgrade one
// fault set at a time): enter, wait until nothing depends on the SDSs,
// exit. Both are safe to repeat (a resumed roll does).

import (
	"context"
	"fmt"
	"time"

	"github.com/cairn-storage/cairn/vcenter-plugin/internal/poll"
)

// EnterMaintenance puts the SDSs names in maintenance mode (those not in
// maintenance yet) and waits, at most timeout, until the gateway reports
// each of them in maintenance with nothing depending on it any more: only
// then may its SVM stop (protected mode copies the data away first).
func EnterMaintenance(ctx context.Context, api API, names []string, mode string, timeout, interval time.Duration) error {
	for _, name := range names {
		s, err := api.GetSDS(ctx, name)
		if err != nil {
			return err
		}
		if s.State != SDSNormal {
			continue // entered before a resume
		}
		if err := api.EnterSDSMaintenance(ctx, s.ID, mode); err != nil {
			return fmt.Errorf("sds %s: enter %s maintenance: %w", name, mode, err)
		}
	}
	return poll.Until(ctx, timeout, interval, "check the gateway's events for why the SDS cannot leave", func() (bool, string, error) {
		for _, name := range names {
			s, err := api.GetSDS(ctx, name)
			if err != nil {
				return false, "", err
			}
			if s.State == SDSNormal {
				return false, "sds " + name + " has not entered maintenance", nil
			}
			if m := s.Maintenance; m != nil && m.Mode != "" && m.State != MaintIn {
				return false, fmt.Sprintf("sds %s is still %s maintenance (%s): its copies are being moved", name, m.State, m.Mode), nil
			}
		}
		return true, "", nil
	})
}

// ExitMaintenance takes the SDSs names out of maintenance (those in it).
func ExitMaintenance(ctx context.Context, api API, names []string) error {
	for _, name := range names {
		s, err := api.GetSDS(ctx, name)
		if err != nil {
			return err
		}
		if s.State == SDSNormal {
			continue
		}
		if err := api.ExitSDSMaintenance(ctx, s.ID); err != nil {
			return fmt.Errorf("sds %s: leave maintenance: %w", name, err)
		}
	}
	return nil
}
