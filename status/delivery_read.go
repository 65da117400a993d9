package status

import "context"

// readDelivery reads into a the final receipts of each class a serves
// over the last DeliveryWindow (admission's per-minute counters).
func readDelivery(ctx context.Context, s Setup, a *Account) error {
	stats, err := s.Limiter.Ledger().DeliveryStats(ctx, DeliveryWindow)
	if err != nil {
		return err
	}
	a.Delivery = map[string]*Delivery{}
	for _, class := range a.Classes {
		st := stats[class]
		a.Delivery[class] = deliveryOf(st.Finals, st.Delivered, st.P50, st.P99)
	}
	return nil
}
