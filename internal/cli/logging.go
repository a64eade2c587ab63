package cli

import (
	"io"
	"os"

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
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
}
