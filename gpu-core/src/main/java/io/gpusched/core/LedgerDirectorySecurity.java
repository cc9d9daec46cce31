package io.gpusched.core;

import static io.gpusched.core.LedgerException.io;

import io.gpusched.core.LedgerException.Kind;
import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * Who may have written the node ledger's directory and files: the checks that make the ledger trusted (writable by
 * its owner only; owned by this process's user or root, or, for a reader, by the directory's owner), and the creation
 * of the state directory with modes that let readers reach the ledger whatever the umask. Used by the ledger file,
 * the node identity file and the waiters' directory.
 */
final class LedgerDirectorySecurity {

    private LedgerDirectorySecurity() {
    }

    /**
     * Creates the state directory when absent (every level it creates gets 0755 whatever the umask, so a reader can
     * reach the ledger), then checks that only its owner may write it.
     */
    static void prepareDirectory(Path dir) {
        if (!Files.isDirectory(dir)) {
            try {
                Path first = dir; // the outermost directory this call creates
                while (first.getParent() != null && !Files.exists(first.getParent())) {
                    first = first.getParent();
                }
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwxr-xr-x")));
                // the umask may have narrowed the modes: readers (a YARN container's user) need to reach the ledger
                for (Path p = dir; p != null && p.startsWith(first); p = p.getParent()) {
                    Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
                }
            } catch (IOException e) {
                throw io("cannot create the state directory " + dir, dir, e);
            }
        }
        checkNotWritableByOthers(dir, "state directory");
    }

    /**
     * A writer's check of {@code p}: writable by its owner only, and owned by this process's user or root.
     *
     * @throws LedgerException {@code INSECURE_PERMISSIONS} otherwise
     */
    static void checkNotWritableByOthers(Path p, String what) {
        Set<PosixFilePermission> perms;
        try {
            perms = Files.getPosixFilePermissions(p);
        } catch (UnsupportedOperationException e) {
            return;
        } catch (NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        checkNotWritableByOthers(p, perms, what);
        checkOwner(p, what);
    }

    /** @throws LedgerException {@code INSECURE_PERMISSIONS} when {@code perms} let its group or others write */
    private static void checkNotWritableByOthers(Path p, Set<PosixFilePermission> perms, String what) {
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            String mode = PosixFilePermissions.toString(perms);
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is writable by "
                    + (perms.contains(PosixFilePermission.OTHERS_WRITE) ? "other users" : "its group") + " (mode "
                    + mode + "); the node ledger decides who gets which GPU, so it must be writable by its owner only:"
                    + " run chmod go-w " + p, null);
        }
    }

    /** The owner of a ledger path must be this process's user or root: any other owner may rewrite it. */
    private static void checkOwner(Path p, String what) {
        int owner;
        int me;
        try {
            owner = (Integer) Files.getAttribute(p, "unix:uid");
            me = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        } catch (UnsupportedOperationException | IllegalArgumentException | NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the owner of " + p, p, e);
        }
        if (owner != me && owner != 0) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is owned by uid "
                    + owner + ", another user than this process's (uid " + me + "); the node ledger decides who gets"
                    + " which GPU, so it must be owned by the user running gpusched or by root: run chown " + me + " "
                    + p, null);
        }
    }

    /**
     * A reader's checks: the directory exists and is writable by its owner only; the ledger is a regular file (not a
     * link), writable by its owner only, owned by the directory's owner, by root or by this process's user. Unlike a
     * writer, a reader may be another user than the directory's owner (a YARN container is never the NodeManager's
     * user): whoever owns the directory it was told to read is the one it trusts, and nobody else may have written.
     *
     * @param dir  the state directory
     * @param file the ledger file in it
     */
    static void checkForReader(Path dir, Path file) {
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
            checkNotWritableByOthers(dir, d.permissions(), "state directory");
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
        checkNotWritableByOthers(file, f.permissions(), "ledger");
        checkReaderOwner(file, dir, "node ledger");
    }

    /**
     * A reader's owner rule for a file of the state directory {@code dir}: owned by the directory's owner, by root, or
     * by this process's user (a writer's rule, {@link #checkNotWritableByOthers(Path, String)}, allows only the last
     * two).
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

    /** A reader's checks of a file of the state directory {@code dir}: writable by its owner only, owned as above. */
    static void checkForReader(Path p, Path dir, String what) {
        try {
            checkNotWritableByOthers(p, Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS), what);
        } catch (UnsupportedOperationException | NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        checkReaderOwner(p, dir, what);
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
