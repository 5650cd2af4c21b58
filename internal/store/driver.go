package store

// driverName is the database/sql driver Open uses: modernc.org/sqlite's. A
// test that records every statement the store runs wraps it under another
// name (plan_test.go).
var driverName = "sqlite"
