package runfiles

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// A run directory is read as a tree of its own: a symbolic link inside it that points out of it is never
// followed, so whoever can write into a run directory cannot make a reader serve other files of its host
// (docs/operations.md "Exposure"). Links that stay inside the run directory are followed.

// ErrOutsideRun is the error of a path that leaves its run directory, directly or through a link.
var ErrOutsideRun = errors.New("path leaves the run directory")

// Within reports whether path, named under root, resolves (links followed) to a place inside root. A path that
// does not exist is within root when its name is.
func Within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsLocal(rel) {
		return false
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return false
	}
	realPath, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		// A dangling link is followed by no one; a missing file is simply missing.
		if _, lerr := os.Lstat(path); lerr == nil {
			return false
		}
		return true
	}
	if err != nil {
		return false
	}
	rel, err = filepath.Rel(realRoot, realPath)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// ErrNotRegular is the error of a run file that is not a regular file (a FIFO, a device, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is the error of a file over the size its reader accepts (ReadFileMax).
var ErrTooLarge = errors.New("file too large")

// Open opens path, named under root, through an os.Root: neither a link in the path nor one swapped in after a
// check can lead out of root. Only a regular file is opened: the open itself does not block (O_NONBLOCK: a FIFO
// would wait for a writer, and every reader of the run behind it), and anything else is refused with
// ErrNotRegular (docs/reliability.md "Hostile run directories"). Its errors name the path relative to root.
func Open(root, path string) (*os.File, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, &fs.PathError{Op: "open", Path: filepath.Base(path), Err: ErrOutsideRun}
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" { // os's unexported errPathEscapes
			return nil, &fs.PathError{Op: "open", Path: rel, Err: ErrOutsideRun}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: rel, Err: ErrNotRegular}
	}
	return f, nil
}

// ReadFile reads path, named under root, as Open opens it.
func ReadFile(root, path string) ([]byte, error) {
	return ReadFileMax(root, path, -1)
}

// ReadFileMax is ReadFile for a file of at most limit bytes (limit < 0: any size); a larger one is refused
// with ErrTooLarge, by its size, before anything is read.
func ReadFileMax(root, path string, limit int64) ([]byte, error) {
	f, err := Open(root, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if limit < 0 {
		return io.ReadAll(f)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: filepath.Base(path), Err: ErrTooLarge}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1)) // a file growing meanwhile is cut at limit+1
	if err == nil && int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: filepath.Base(path), Err: ErrTooLarge}
	}
	return b, err
}

// linkLeaves reports whether the directory entry e of dir is a symbolic link that resolves out of root.
func linkLeaves(root, dir string, e fs.DirEntry) bool {
	return e.Type()&fs.ModeSymlink != 0 && !Within(root, filepath.Join(dir, e.Name()))
}
