package cli

import (
	"io"
	"os"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// setupLogging sends controller-runtime's and client-go's logs to one structured logger on
// stderr; verbosity raises the level (1 = debug).
func setupLogging(verbosity int) {
	setupLoggingTo(os.Stderr, verbosity)
}

// setupLoggingTo sends the logs to w instead.
func setupLoggingTo(w io.Writer, verbosity int) {
	logger := zap.New(zap.WriteTo(w), zap.UseDevMode(false), zap.Level(zapcore.Level(-verbosity)))
	if os.Getenv("MACHINA_DEBUG_WRITES") == "2" {
		logger = unsampledLogger(w, verbosity)
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}

// unsampledLogger is the same JSON logger without the production logger's sampling (100
// lines of one message a second, then one in 100): with MACHINA_DEBUG_WRITES=2 every write's
// line must reach the log, however many the manager sends.
func unsampledLogger(w io.Writer, verbosity int) logr.Logger {
	cfg := uzap.NewProductionEncoderConfig()
	cfg.EncodeTime = zapcore.RFC3339TimeEncoder
	enc := &zap.KubeAwareEncoder{Encoder: zapcore.NewJSONEncoder(cfg)}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.Level(-verbosity))
	return zapr.NewLogger(uzap.New(core, uzap.AddStacktrace(zapcore.ErrorLevel)))
}
