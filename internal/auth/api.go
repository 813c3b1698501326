package auth

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// CreateKey, ListKeys and RevokeKey are the key-management calls for any
// transport; the caller has checked the admin role. by is the caller (nil
// with authentication off): it names the caller in the audit line, and it
// may create, list and revoke only keys inside its own role and scope
// (Identity.Manages). A key it may not create is PERMISSION_DENIED; a key
// it may not revoke is NOT_FOUND, as a name that does not exist, and is
// left out of its list.
func CreateKey(keys *Keyring, by *Identity, req *pb.CreateKeyRequest) (*pb.CreateKeyResponse, error) {
	if keys == nil {
		return nil, errNoKeyring
	}
	role := RoleFromProto(req.GetRole())
	if role == RoleNone {
		return nil, Invalid("role is required: KEY_ROLE_READ, _WRITE, _SCHEMA or _ADMIN")
	}
	key, info, err := keys.Create(by, req.GetName(), role, req.GetTypes())
	if err != nil {
		return nil, err
	}
	return &pb.CreateKeyResponse{Key: key, Info: keyInfo(info)}, nil
}

// ListKeys lists the keys that by manages; see CreateKey.
func ListKeys(keys *Keyring, by *Identity) (*pb.ListKeysResponse, error) {
	if keys == nil {
		return nil, errNoKeyring
	}
	resp := &pb.ListKeysResponse{}
	for _, k := range keys.List(by) {
		resp.Keys = append(resp.Keys, keyInfo(k))
	}
	return resp, nil
}

// RevokeKey revokes a key; see CreateKey.
func RevokeKey(keys *Keyring, by *Identity, req *pb.RevokeKeyRequest) (*pb.RevokeKeyResponse, error) {
	if keys == nil {
		return nil, errNoKeyring
	}
	if req.GetName() == "" {
		return nil, Invalid("name is required")
	}
	if err := keys.Revoke(by, req.GetName()); err != nil {
		return nil, err
	}
	return &pb.RevokeKeyResponse{}, nil
}

func keyInfo(k KeyInfo) *pb.KeyInfo {
	return &pb.KeyInfo{Name: k.Name, Role: k.Role.Proto(), Types: k.Types, CreatedUnix: k.Created.Unix()}
}
