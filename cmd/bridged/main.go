// Command bridged is the bridged daemon (`bridged run`) and its command line:
// pairing WhatsApp, talking to agents from the terminal, managing groups and
// tasks, status and checks. See `bridged help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/bridged-app/bridged/internal/termsafe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// Once the first signal cancelled ctx, a second one kills the process.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "bridged:", termsafe.Text(err.Error()))
		}
		os.Exit(exitCode(err))
	}
}

// run runs the command line args (without the program name).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return (&app{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, environ: os.Environ}).run(ctx, args)
}
