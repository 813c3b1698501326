package server

// NATSKeyRevoked lets the tests call what authentication calls when it
// revokes a key.
func (s *Server) NATSKeyRevoked(name string) { s.natsKeyRevoked(name) }
