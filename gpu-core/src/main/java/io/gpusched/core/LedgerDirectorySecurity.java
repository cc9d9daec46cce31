package io.gpusched.core;

import static io.gpusched.core.LedgerException.io;

import io.gpusched.core.LedgerException.Kind;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;

/**
 * Who may have written the node ledger's directory and files: the checks that make the ledger trusted (writable by
 * its owner only; owned by this process's user or root, or, for a reader, by the directory's owner), and the creation
 * of the state directory with modes that let readers reach the ledger whatever the umask. Used by the ledger file,
 * the lock file, the node identity file, compaction and the waiters' directory.
 *
 * <p><b>A shared directory.</b> Where a {@link StateGroup} is configured, a directory or file whose group is that group
 * may be written by the group (engines running as service users of their own beside a root service): a directory
 * then must be setgid (its new files get the group), and gpusched creates directories {@code 2770} and files
 * {@code 0660} in it (plus read for others where the directory grants it). Any other group- or other-writable path is
 * refused as before. Because group members may plant entries in such a directory, nothing there is followed or
 * written through: files are opened with {@code O_NOFOLLOW} and must be regular files with one link (a hard link to
 * another file would be written through), subdirectories are checked without following a link, modes are set
 * without following one, and a shared directory is refused where the kernel lets users hard-link files they do not
 * own ({@code fs.protected_hardlinks = 0}).
 */
final class LedgerDirectorySecurity {
    /** The setgid bit of {@code unix:mode}. */
    static final int SETGID = 02000;

    private LedgerDirectorySecurity() {
    }

    /**
     * Creates the state directory when absent (every level it creates gets 0755 whatever the umask, so a reader can
     * reach the ledger; {@code 2770} under a directory the state group shares, plus read and search for others where
     * that directory grants them), then checks that only its owner, or the state group where it shares it, may write
     * it.
     */
    static void prepareDirectory(Path dir, StateGroup group) {
        refuseLinksInSharedDirectories(dir, group);
        if (!Files.isDirectory(dir)) {
            try {
                Path first = dir; // the outermost directory this call creates
                while (first.getParent() != null && !Files.exists(first.getParent())) {
                    first = first.getParent();
                }
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwxr-xr-x")));
                // the umask may have narrowed the modes: readers (a YARN container's user) need to reach the ledger;
                // outermost first, so each level sees its parent's final mode; never through a link planted meanwhile
                List<Path> made = new ArrayList<>();
                for (Path p = dir; p != null && p.startsWith(first); p = p.getParent()) {
                    made.add(0, p);
                }
                for (Path p : made) {
                    Files.setAttribute(p, "unix:mode", directoryMode(p.getParent(), group),
                            LinkOption.NOFOLLOW_LINKS);
                }
            } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
                throw io("cannot create the state directory " + dir, dir, e instanceof IOException i ? i
                        : new IOException(String.valueOf(e.getMessage()), e));
            }
        }
        checkNotWritableByOthers(dir, "state directory", group);
        if (shares(dir, group)) {
            checkProtectedHardlinks(dir, group, Path.of("/proc"));
        }
    }

    /**
     * A member of the state group may rename entries of a directory the group shares, so a path component inside one
     * (a simulated node's {@code simulated/<profile>} below a shared base) is used only where it is not a link: one
     * planted there would make gpusched create and write its files wherever it points.
     *
     * @throws LedgerException {@code INSECURE_PERMISSIONS} naming the link
     */
    static void refuseLinksInSharedDirectories(Path dir, StateGroup group) {
        if (!group.configured()) {
            return;
        }
        for (Path p = dir; p != null && p.getParent() != null; p = p.getParent()) {
            if (Files.isSymbolicLink(p) && shares(p.getParent(), group)) {
                throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, p + " is a symbolic link in " + p.getParent()
                        + ", which group " + group.name().orElse("?") + " may write; it is not followed (a member could"
                        + " point it anywhere): remove it, and gpusched makes the directory", null);
            }
        }
    }

    /** @return the mode for a directory made in {@code parent}: 0755, or 02770 (+ o+rx as the parent) when shared */
    static int directoryMode(Path parent, StateGroup group) {
        PosixFileAttributes a = parent == null ? null : attributes(parent, true);
        if (a == null || !group.owns(a) || !a.permissions().contains(PosixFilePermission.GROUP_WRITE)) {
            return 0755;
        }
        boolean othersRead = a.permissions().contains(PosixFilePermission.OTHERS_READ)
                && a.permissions().contains(PosixFilePermission.OTHERS_EXECUTE);
        return SETGID | 0770 | (othersRead ? 05 : 0);
    }

    /**
     * @return the permissions for a file gpusched creates in {@code dir}: {@code rw-r--r--}, or {@code rw-rw----}
     *         (plus read for others where the directory grants them search) when the state group shares {@code dir}
     */
    static Set<PosixFilePermission> fileMode(Path dir, StateGroup group) {
        PosixFileAttributes a = attributes(dir, true);
        if (a == null || !group.owns(a) || !a.permissions().contains(PosixFilePermission.GROUP_WRITE)) {
            return PosixFilePermissions.fromString("rw-r--r--");
        }
        return PosixFilePermissions.fromString(a.permissions().contains(PosixFilePermission.OTHERS_EXECUTE)
                ? "rw-rw-r--" : "rw-rw----");
    }

    /** @return whether the state group shares {@code dir} (its group, and group-writable) */
    static boolean shares(Path dir, StateGroup group) {
        PosixFileAttributes a = attributes(dir, true);
        return a != null && group.owns(a) && a.permissions().contains(PosixFilePermission.GROUP_WRITE);
    }

    /**
     * Sets {@code p}'s permissions without following a link: a link planted in its place fails, never changes its
     * target.
     */
    static void setMode(Path p, Set<PosixFilePermission> perms) throws IOException {
        Files.getFileAttributeView(p, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS).setPermissions(perms);
    }

    /**
     * A shared directory lets group members plant entries; the kernel keeps them from hard-linking files they do not
     * own into it ({@code fs.protected_hardlinks = 1}, the default of current distributions). Where it does not, a
     * member could link a file of root's there, and root would write through the link before any check could see it.
     *
     * @throws LedgerException {@code INSECURE_PERMISSIONS} when {@code <procRoot>/sys/fs/protected_hardlinks} is 0
     */
    static void checkProtectedHardlinks(Path dir, StateGroup group, Path procRoot) {
        Path f = procRoot.resolve("sys/fs/protected_hardlinks");
        String v;
        try {
            v = Files.readString(f).strip();
        } catch (IOException | RuntimeException e) {
            return; // not Linux, or not visible: nothing to say
        }
        if (v.equals("0")) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, dir, "the state directory " + dir + " is shared with"
                    + " group " + group.name().orElse("?") + ", and this kernel lets users hard-link files they do not"
                    + " own (" + f + " is 0): a member could link another user's file into it, and gpusched would write"
                    + " through the link. Run sysctl -w fs.protected_hardlinks=1 (and set it in /etc/sysctl.d), or"
                    + " stop sharing the directory (chmod g-w " + dir + ")", null);
        }
    }

    /**
     * A writer's check of the state directory {@code p} (or one of its subdirectories, given with
     * {@code follow == false}): writable by its owner only, and owned by this process's user or root; or, where its
     * group is the state group, writable by that group too (then setgid), whoever of the group made it.
     *
     * @throws LedgerException {@code INSECURE_PERMISSIONS} otherwise
     */
    static void checkNotWritableByOthers(Path p, String what, StateGroup group) {
        checkNotWritableByOthers(p, what, group, true);
    }

    /** As {@link #checkNotWritableByOthers(Path, String, StateGroup)}; {@code follow} false refuses a link. */
    static void checkNotWritableByOthers(Path p, String what, StateGroup group, boolean follow) {
        PosixFileAttributes a;
        try {
            a = follow ? Files.readAttributes(p, PosixFileAttributes.class)
                    : Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException e) {
            return;
        } catch (NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        if (a.isSymbolicLink()) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is a symbolic link; it"
                    + " is not followed: remove it (gpusched makes the directory)", null);
        }
        boolean shared = group.owns(a);
        checkNotWritableByOthers(p, a.permissions(), what, shared ? group : StateGroup.NONE);
        if (shared && a.isDirectory() && a.permissions().contains(PosixFilePermission.GROUP_WRITE)
                && (mode(p) & SETGID) == 0) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is writable by group "
                    + group.name().orElse("?") + " but not setgid, so files its members make would belong to their"
                    + " own groups; run chmod g+s " + p, null);
        }
        if (!shared) {
            checkOwner(p, follow, what);
        }
    }

    /**
     * A writer's check of a file of the state directory, never through a link: a regular file with one link, writable
     * by its owner only and owned by this process's user or root; or, where its group is the state group, writable by
     * that group too, whoever of the group made it. Absent: nothing to check.
     *
     * @throws LedgerException {@code INSECURE_PERMISSIONS} for a link, a FIFO, device or directory, a file with other
     *                         links, or one others may write
     */
    static void checkFile(Path p, String what, StateGroup group) {
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException | NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        if (!a.isRegularFile()) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is not a regular file ("
                    + (a.isSymbolicLink() ? "a symbolic link" : a.isDirectory() ? "a directory" : "a FIFO or device")
                    + "); it is not followed, opened or written: remove it, and gpusched makes it again", null);
        }
        int links = links(p);
        if (links > 1) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " has " + links + " hard"
                    + " links: writing it would write another file too; it is not used: remove it (gpusched makes it"
                    + " again) and the other links", null);
        }
        boolean shared = group.owns(a);
        checkNotWritableByOthers(p, a.permissions(), what, shared ? group : StateGroup.NONE);
        if (!shared) {
            checkOwner(p, false, what);
        }
    }

    /** @throws LedgerException {@code INSECURE_PERMISSIONS} when {@code perms} let others, or another group, write */
    private static void checkNotWritableByOthers(Path p, Set<PosixFilePermission> perms, String what,
            StateGroup shared) {
        boolean others = perms.contains(PosixFilePermission.OTHERS_WRITE);
        if (others || (perms.contains(PosixFilePermission.GROUP_WRITE) && !shared.configured())) {
            String mode = PosixFilePermissions.toString(perms);
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is writable by "
                    + (others ? "other users" : "its group") + " (mode " + mode + "); the node ledger decides who gets"
                    + " which GPU, so it must be writable by its owner only: run chmod " + (others ? "o-w " : "go-w ")
                    + p + (others ? "" : "; or, to share it with the engines' users, make the group that owns it the"
                            + " state group (gpu.state_group or " + StateGroup.ENV + ")"),
                    null);
        }
    }

    /** The owner of a ledger path must be this process's user or root: any other owner may rewrite it. */
    private static void checkOwner(Path p, boolean follow, String what) {
        int owner;
        try {
            owner = follow ? (Integer) Files.getAttribute(p, "unix:uid") : uid(p);
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            owner = -1;
        }
        int me = myUid();
        if (owner < 0 || me < 0) {
            return;
        }
        if (owner != me && owner != 0) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is owned by uid "
                    + owner + ", another user than this process's (uid " + me + "); the node ledger decides who gets"
                    + " which GPU, so it must be owned by the user running gpusched or by root: run chown " + me + " "
                    + p + " (or share the directory with a state group: gpu.state_group, " + StateGroup.ENV + ")",
                    null);
        }
    }

    /**
     * A reader's checks: the directory exists and is writable by its owner only; the ledger is a regular file (not a
     * link), writable by its owner only, owned by the directory's owner, by root or by this process's user. Unlike a
     * writer, a reader may be another user than the directory's owner (a YARN container is never the NodeManager's
     * user): whoever owns the directory it was told to read is the one it trusts, and nobody else may have written.
     *
     * @param dir   the state directory
     * @param file  the ledger file in it
     * @param group the state group: a directory and ledger it owns may be written by it
     */
    static void checkForReader(Path dir, Path file, StateGroup group) {
        PosixFileAttributes d;
        try {
            d = Files.readAttributes(dir, PosixFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new LedgerException(Kind.UNREADABLE, dir, "the state directory " + dir + " does not exist: no"
                    + " process of this node has written a node ledger there; give the directory the node's writers"
                    + " use (GPUSCHED_STATE_DIR, --state-dir, gpusched.yarn.state-dir)", null);
        } catch (AccessDeniedException e) {
            throw denied(dir, dir, file);
        } catch (UnsupportedOperationException e) {
            d = null;
        } catch (IOException e) {
            throw io("cannot read the state directory " + dir, dir, e);
        }
        if (d != null) {
            if (!d.isDirectory()) {
                throw new LedgerException(Kind.UNREADABLE, dir, "the state directory " + dir + " is not a directory;"
                        + " give the directory that holds the node ledger", null);
            }
            checkNotWritableByOthers(dir, d.permissions(), "state directory", group.owns(d) ? group
                    : StateGroup.NONE);
        }
        PosixFileAttributes f;
        try {
            f = Files.readAttributes(file, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            throw new LedgerException(Kind.UNREADABLE, file, "there is no node ledger " + file + ": no process of"
                    + " this node has allocated GPUs with this state directory; give the directory the node's writers"
                    + " use (GPUSCHED_STATE_DIR, --state-dir, gpusched.yarn.state-dir)", null);
        } catch (AccessDeniedException e) {
            throw denied(dir, dir, file);
        } catch (UnsupportedOperationException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read " + file, file, e);
        }
        if (!f.isRegularFile()) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, file, "the node ledger " + file + " is not a regular"
                    + " file (" + (f.isSymbolicLink() ? "a symbolic link" : "a directory, FIFO or device") + "); it is"
                    + " not read: a ledger is the regular file its writers create", null);
        }
        checkNotWritableByOthers(file, f.permissions(), "ledger", group.owns(f) ? group : StateGroup.NONE);
        if (!group.owns(f)) {
            checkReaderOwner(file, dir, "node ledger");
        }
    }

    /**
     * A reader's owner rule for a file of the state directory {@code dir}: owned by the directory's owner, by root, or
     * by this process's user (a writer's rule, {@link #checkNotWritableByOthers(Path, String, StateGroup)}, allows
     * only the last two).
     */
    static void checkReaderOwner(Path p, Path dir, String what) {
        int owner = uid(p);
        int dirOwner = uid(dir);
        int me = myUid();
        if (owner >= 0 && owner != 0 && owner != me && owner != dirOwner) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is owned by uid "
                    + owner + ", neither the owner of its directory (uid " + dirOwner + ") nor root; another user may"
                    + " have written it, so it is not read: run chown " + dirOwner + " " + p, null);
        }
    }

    /**
     * A reader's checks of a file of the state directory {@code dir}: writable by its owner only (or the state group
     * where it owns the file), owned as above.
     */
    static void checkForReader(Path p, Path dir, String what, StateGroup group) {
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException | NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        checkNotWritableByOthers(p, a.permissions(), what, group.owns(a) ? group : StateGroup.NONE);
        if (!group.owns(a)) {
            checkReaderOwner(p, dir, what);
        }
    }

    /**
     * Writes {@code body} to {@code dir/name} whole or not at all: a new temporary file of a random name (created,
     * never opened through a link), forced, given {@link #fileMode} without following a link, renamed over the old one
     * (a rename replaces a link itself, never its target), the directory forced.
     */
    static void writeAtomically(Path dir, String name, byte[] body, StateGroup group) throws IOException {
        byte[] rnd = new byte[6];
        new SecureRandom().nextBytes(rnd);
        Path tmp = dir.resolve("." + name + "." + HexFormat.of().formatHex(rnd) + ".tmp");
        Set<PosixFilePermission> mode = fileMode(dir, group);
        try {
            try (FileChannel c = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                    LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(mode))) {
                ByteBuffer b = ByteBuffer.wrap(body);
                while (b.hasRemaining()) {
                    c.write(b);
                }
                c.force(true);
            }
            setMode(tmp, mode); // the umask may have narrowed it
            Files.move(tmp, dir.resolve(name), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
        } catch (IOException e) {
            // some file systems cannot sync a directory; the rename itself is atomic
        }
    }

    /** @return {@code p}'s attributes, following a link or not, or null when they cannot be read */
    static PosixFileAttributes attributes(Path p, boolean follow) {
        try {
            return follow ? Files.readAttributes(p, PosixFileAttributes.class)
                    : Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    /** @return {@code unix:mode} of {@code p} (following a link), or 0 where the file system does not say */
    private static int mode(Path p) {
        try {
            return (Integer) Files.getAttribute(p, "unix:mode");
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return 0;
        }
    }

    /** @return how many hard links {@code p} (not following a link) has, or 1 where the file system does not say */
    private static int links(Path p) {
        try {
            return (Integer) Files.getAttribute(p, "unix:nlink", LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return 1;
        }
    }

    /** @return the owner of {@code p} (not following a link), or -1 where the file system does not say */
    private static int uid(Path p) {
        try {
            return (Integer) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return -1;
        }
    }

    /** @return this process's user ({@code /proc/self} is a link to a directory the process owns), or -1 */
    private static int myUid() {
        try {
            return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return -1;
        }
    }

    /**
     * @param p    the path the reader could not read
     * @param dir  the state directory
     * @param file the ledger file
     * @return {@code UNREADABLE} for {@code p}, saying which modes a reader needs
     */
    static LedgerException denied(Path p, Path dir, Path file) {
        int me = myUid();
        return new LedgerException(Kind.UNREADABLE, p, "cannot read the node ledger " + file + " as uid " + me
                + ": permission denied; readers need the state directory readable and searchable and the ledger"
                + " readable (writers keep them writable by their owner only): chmod 0755 " + dir + " and chmod 0644 "
                + file + ", or give the readers' group access (chgrp <group> " + dir + " " + file + "; chmod 0750 "
                + dir + "; chmod 0640 " + file + ")", null);
    }
}
