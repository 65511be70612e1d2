package policy

import "path"

// AccessEffects are the effects of the host itself reading or writing the file at host path
// p on a sandbox's behalf (fs.read, fs.write): read or write; secret when p is or holds a
// secret; for a write, outside or protected by p's class.
//
// p is taken as its own real path, not resolved: the host opened it beneath its mount
// without following a link, so p is where the file it opened is. Resolving p again would
// judge whatever p leads to by the time of the judgment, which a sandbox swapping an entry
// for a symlink chooses, not the file opened.
func AccessEffects(ctx *Context, p string, write bool) Effects {
	f := ctx.compiled().host.judgeReal(ctx.fs(), path.Clean(p), false, write)
	e := Read
	if write {
		e = Write
	}
	if f.secretish() {
		e |= Secret
	}
	if write {
		e |= classEffect(f.class)
	}
	return e
}
