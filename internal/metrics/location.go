package metrics

// BackupLocationChecked records the outcome of a storage location's check:
// 1 Available, 0 Unavailable.
func BackupLocationChecked(location string, available bool) {
	v := 0.0
	if available {
		v = 1
	}
	m.locationStatus.WithLabelValues(location).Set(v)
}

// BackupLocationRemoved drops the series of a location that was deleted.
// Velero keeps it at its last value until the server restarts, so an
// alert on an Unavailable location that was removed would go on firing.
func BackupLocationRemoved(location string) {
	m.locationStatus.DeleteLabelValues(location)
}
