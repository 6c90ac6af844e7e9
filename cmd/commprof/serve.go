package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/web"
)

type serveOptions struct {
	addr  string
	token string
}

func newServeCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [RUNS_DIR]",
		Short: "Serve the runs in a directory as web pages: reports, diffs, live progress",
		Long:  help("serve"),
		Example: `  commprof serve
  commprof serve /scratch/runs --addr 127.0.0.1:8080
  commprof serve --addr 0.0.0.0:7070 runs     # prints a URL with a generated token`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most 1 argument, the runs directory; got %d", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "runs"
			if len(args) == 1 {
				dir = args[0]
			}
			return runServe(cmd.Context(), ios, o, dir)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:7070", "address to listen on, host:port (port 0 picks a free one)")
	f.StringVar(&o.token, "token", "", "require this token on every request (generated when --addr is not loopback)")
	return cmd
}

func runServe(ctx context.Context, ios *iostreams.IOStreams, o *serveOptions, dir string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	host, port, err := net.SplitHostPort(o.addr)
	if n, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || (port != "0" && n == 0) {
		return usagef("--addr %q: want host:port with a port from 0 to 65535, such as 127.0.0.1:7070", o.addr)
	}
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the runs directory %s does not exist: record a run into it first (commprof record --out %s/NAME -- ...), or name another directory", dir, dir)
		}
		return fmt.Errorf("the runs directory %s: %w", dir, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("the runs directory %s is not a directory", dir)
	}
	token := o.token
	loopback := isLoopback(ctx, host)
	if !loopback {
		fmt.Fprintf(stderr, "commprof: warning: %s is not a loopback address: anyone who can reach it and has the token can read every run in %s\n", o.addr, dir)
		if token == "" {
			if token, err = newToken(); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "commprof: warning: no --token given, so every request must carry this generated one: %s\n", token)
		}
	}
	h, err := web.New(web.Config{RunsDir: dir, Token: token, Logf: func(format string, args ...any) {
		fmt.Fprintf(stderr, "commprof serve: "+format+"\n", args...)
	}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Requests stop their work when the command is interrupted.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving the runs in %s at %s\n", dir, openURL(ln.Addr().(*net.TCPAddr), host, loopback, token))
	fmt.Fprintln(stdout, "press Ctrl-C to stop")
	select {
	case err := <-errc:
		return fmt.Errorf("serving on %s: %w", o.addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-errc
	fmt.Fprintln(stderr, "commprof serve: stopped")
	return nil
}

// isLoopback reports whether host names only loopback addresses.
func isLoopback(ctx context.Context, host string) bool {
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "" {
		return false // every interface
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(rctx, host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return false
		}
	}
	return true
}

// newToken returns 128 random bits in hex.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// openURL is the URL to open for a server listening on addr, asked to
// listen on host: a wildcard host is shown as this machine's name, and a
// name for the loopback address as localhost (without a token the server
// answers only to localhost and IP addresses).
func openURL(addr *net.TCPAddr, host string, loopback bool, token string) string {
	show := host
	ip := net.ParseIP(host)
	switch {
	case host == "" || ip != nil && ip.IsUnspecified():
		show, _ = os.Hostname()
		if show == "" {
			show = "localhost"
		}
	case loopback && ip == nil:
		show = "localhost"
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(show, fmt.Sprint(addr.Port)), Path: "/"}
	if token != "" {
		u.RawQuery = url.Values{"token": {token}}.Encode()
	}
	return u.String()
}
