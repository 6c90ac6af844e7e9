package driver

import "fmt"

// UsageError marks an error in how a command was called (a bad flag
// value, a missing argument): the command exits with status 2 and points
// to its help.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError of a formatted message.
func Usagef(format string, a ...any) error { return UsageError{Err: fmt.Errorf(format, a...)} }
