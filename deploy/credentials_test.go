package deploy_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// credentialName matches files that hold keys or certificates by name.
var credentialName = regexp.MustCompile(`(?i)(\.(pem|key|crt|cer|der|p12|pfx|jks)|^id_(rsa|ecdsa|ed25519))$`)

// credentialMarkers are PEM headers of private keys and certificates.
var credentialMarkers = [][]byte{
	[]byte("-----BEGIN CERTIFICATE-----"),
	[]byte("PRIVATE KEY-----"),
}

// TestNoCredentialsInRepository: deployments make their keys and certificates
// when they start (docker-compose's credentials service, the jepsen harness
// through it, `sessionstore certs`); none is ever committed, where every deployment
// would share it.
func TestNoCredentialsInRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			// .git holds history, not files; certs/ is the git-ignored
			// output of the documented `sessionstore certs --out certs`.
			if rel == ".git" || rel == "certs" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if credentialName.MatchString(d.Name()) {
			found = append(found, rel+" (by name)")
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range credentialMarkers {
			if bytes.Contains(b, m) && !isThisTest(rel) {
				found = append(found, rel+" (contains "+strings.Trim(string(m), "-")+")")
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("keys or certificates in the repository (generate them per deployment instead):\n  %s", strings.Join(found, "\n  "))
	}
}

func isThisTest(rel string) bool { return filepath.ToSlash(rel) == "deploy/credentials_test.go" }
