package sshfile

// SetOnFull sets the hook called once a read's cap is filled.
func SetOnFull(f func()) { onFull = f }
