// contexthash prints the docker-build provider's view of a build context: the hash its Diff compares
// (Dockerfile bytes, then every file the ignore file lets through: bytes, path, mode) and the files it sent.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/moby/patternmatcher/ignorefile"
	"github.com/tonistiigi/fsutil"
)

func patterns(contextDir, dockerfile string) []string {
	for _, candidate := range []string{dockerfile + ".dockerignore", filepath.Join(contextDir, ".dockerignore")} {
		f, err := os.Open(candidate)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			panic(err)
		}
		defer f.Close()
		p, err := ignorefile.ReadAll(f)
		if err != nil {
			panic(err)
		}
		return p
	}
	return nil
}

func main() {
	contextDir, dockerfile := os.Args[1], os.Args[2]
	h := sha256.New()
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		panic(err)
	}
	h.Write(df)
	base, err := fsutil.NewFS(contextDir)
	if err != nil {
		panic(err)
	}
	filtered, err := fsutil.NewFilterFS(base, &fsutil.FilterOpt{ExcludePatterns: patterns(contextDir, dockerfile)})
	if err != nil {
		panic(err)
	}
	files := []string{}
	err = filtered.Walk(context.Background(), "/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && info.Mode().Type() != os.ModeSymlink {
			return nil
		}
		f, err := filtered.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		h.Write([]byte(filepath.ToSlash(path.Clean(p))))
		h.Write([]byte(info.Mode().String()))
		files = append(files, filepath.ToSlash(path.Clean(p)))
		return nil
	})
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(map[string]any{"hash": hex.EncodeToString(h.Sum(nil)), "files": files})
	os.Stdout.Write(append(out, '\n'))
}
