package nats

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/auth"
)

// Key-management subjects, relative to the prefix (admin role).
const (
	SubjectKeysCreate = "keys.create"
	SubjectKeysList   = "keys.list"
	SubjectKeysRevoke = "keys.revoke"
)

func (s *Service) keysCreate(r *request) {
	req := new(pb.CreateKeyRequest)
	if err := s.decode(r, req); err != nil {
		s.fail(r, err)
		return
	}
	resp, err := auth.CreateKey(s.opts.Keys, r.id, req)
	if err != nil {
		s.fail(r, err)
		return
	}
	s.reply(r, resp)
}

func (s *Service) keysList(r *request) {
	if err := s.decode(r, new(pb.ListKeysRequest)); err != nil {
		s.fail(r, err)
		return
	}
	resp, err := auth.ListKeys(s.opts.Keys, r.id)
	if err != nil {
		s.fail(r, err)
		return
	}
	s.reply(r, resp)
}

func (s *Service) keysRevoke(r *request) {
	req := new(pb.RevokeKeyRequest)
	if err := s.decode(r, req); err != nil {
		s.fail(r, err)
		return
	}
	resp, err := auth.RevokeKey(s.opts.Keys, r.id, req)
	if err != nil {
		s.fail(r, err)
		return
	}
	s.reply(r, resp)
}
