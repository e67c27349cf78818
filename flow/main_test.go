package flow_test

import (
	"github.com/flowlite/flowlite/internal/pgtest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }
