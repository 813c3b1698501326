package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/protobase/protobase/internal/apistatus"
	"github.com/protobase/protobase/internal/auth"
)

// AdminKeyFile is the file, in the data directory, that the first start
// with authentication writes the bootstrap admin key to (mode 0600).
const AdminKeyFile = "admin.key"

// AdminKeyName is the name of the bootstrap admin key.
const AdminKeyName = "admin"

// authRequired decides whether callers must authenticate: when Config.Auth
// asks for it, or when any listener is reachable from another machine,
// unless Config.InsecureNoAuth says otherwise.
func authRequired(cfg *Config, log *slog.Logger) (bool, error) {
	exposed := exposedListeners(cfg)
	if len(exposed) > 0 && cfg.TLSCertFile == "" {
		log.Warn("a listener is reachable from other machines without TLS: API keys and records cross the network in clear (see docs/security.md)",
			"listeners", exposed)
	}
	if cfg.Auth { // exclusive with InsecureNoAuth: Validate checked
		return true, nil
	}
	if len(exposed) == 0 {
		return false, nil
	}
	if cfg.InsecureNoAuth {
		log.Warn("authentication is OFF on a listener reachable from other machines: anyone who can connect can read, change and drop everything",
			"listeners", exposed)
		return false, nil
	}
	return true, nil
}

// exposedListeners lists the configured addresses not bound to loopback.
func exposedListeners(cfg *Config) []string {
	addrs := []string{cfg.GRPCAddr, cfg.HTTPAddr, cfg.MetricsAddr}
	if cfg.NATS {
		addrs = append(addrs, cfg.NATSAddr)
	}
	if cfg.NATSURL != "" {
		if u, err := url.Parse(cfg.NATSURL); err == nil && u.Host != "" {
			addrs = append(addrs, u.Host)
		} else {
			addrs = append(addrs, "--nats-url (unparsed, so taken as remote)")
		}
	}
	var out []string
	for _, a := range addrs {
		if a != "" && !auth.IsLoopback(a) {
			out = append(out, a)
		}
	}
	return out
}

// startAuth opens the keyring and, with authentication on and no key yet,
// creates the bootstrap admin key: Config.AdminKey when set, else a new
// one written to DATA/admin.key. The key is never logged.
func (s *Server) startAuth() error {
	on, err := authRequired(&s.cfg, s.log)
	if err != nil {
		return err
	}
	keys, err := auth.OpenKeyring(s.eng, s.log)
	if err != nil {
		return fmt.Errorf("open keyring: %w", err)
	}
	s.keys, s.auth = keys, on
	// On a store several servers share, keys created or revoked on
	// another server take effect here too.
	s.eng.WatchAPIKeys(func() {
		if err := keys.Reload(); err != nil {
			s.log.Warn("reload api keys after a change on another server", "err", err)
		}
	})
	if !on || keys.Len() > 0 {
		if on {
			s.log.Info("authentication is on", "keys", keys.Len())
		}
		if on && s.cfg.AdminKey != "" {
			s.log.Info("the configured admin key is not added: keys exist already")
		}
		return nil
	}
	if s.cfg.AdminKey != "" {
		if _, err := keys.Add(nil, AdminKeyName, s.cfg.AdminKey, auth.RoleAdmin, nil); err != nil {
			return fmt.Errorf("bootstrap admin key: %w", err)
		}
		s.log.Info("authentication is on; created the admin key from the configuration", "key_name", AdminKeyName)
		return nil
	}
	key, err := auth.GenerateKey()
	if err != nil {
		return err
	}
	path := filepath.Join(s.cfg.DataDir, AdminKeyFile)
	if err := writeSecret(path, key+"\n"); err != nil {
		return fmt.Errorf("bootstrap admin key: %w", err)
	}
	if _, err := keys.Add(nil, AdminKeyName, key, auth.RoleAdmin, nil); err != nil {
		return fmt.Errorf("bootstrap admin key: %w", err)
	}
	s.log.Info("authentication is on; created an admin key (role admin); read it from the file, then create narrower keys with protobase keys create",
		"key_name", AdminKeyName, "file", path)
	return nil
}

// writeSecret writes data to path with mode 0600, replacing any old file
// through a rename, so the file is never readable by others, not even
// half-written.
func writeSecret(path, data string) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Keys returns the server's keyring (for tools and tests).
func (s *Server) Keys() *auth.Keyring { return s.keys }

// AuthRequired reports whether callers must authenticate.
func (s *Server) AuthRequired() bool { return s.auth }

// requireKeyHTTP guards a plain HTTP handler (the metrics listener) with
// the Authorization header when authentication is on: any valid key
// without a scope.
func (s *Server) requireKeyHTTP(h http.Handler) http.Handler {
	if !s.auth {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.keys.VerifyHeader(r.Context(), r.Header.Get("Authorization"))
		if err == nil && id.Scoped() {
			// The series name every record type (the reaper's, per type).
			err = auth.ErrScopedDenied(id, "/metrics")
		}
		if err != nil {
			st := apistatus.Status(err)
			http.Error(w, st.Message(), apistatus.HTTPStatus(st.Code()))
			return
		}
		h.ServeHTTP(w, r)
	})
}
