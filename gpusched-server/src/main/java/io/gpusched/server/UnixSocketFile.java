package io.gpusched.server;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipalNotFoundException;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Set;

/**
 * The node service's socket file: where it may live, how a stale one is replaced, and its mode and group.
 *
 * <ul>
 *   <li>The directory is created {@code 0755} (owned by this process's user, root for the service) when absent; an
 *       existing one must be a real directory (not a link) that no one but its owner can write, and owned by this
 *       process's user or root, so no other user can swap the socket or the directory under the service.</li>
 *   <li>A file already at the path is replaced only when it is a socket (never a link, a regular file, a FIFO or a
 *       directory: refused, naming it) and nothing answers on it (a live service's socket is refused, naming it).</li>
 *   <li>The socket is bound in a private {@code 0700} directory beside the path, given its mode ({@code 0666}, or
 *       {@code 0660} and the group when a socket group is set) and its group there, and only then renamed onto the
 *       path (an atomic rename), so there is no moment when it is reachable with another mode or group.</li>
 * </ul>
 */
final class UnixSocketFile {
    /** The kernel's limit on a socket path ({@code sun_path}, 108 bytes with its NUL). */
    static final int MAX_PATH_BYTES = 107;

    private final Path path;
    private final String group;
    private Path bindDir;
    private Object fileKey;

    /**
     * @param path  where the socket is published
     * @param group the group that may connect (mode 0660), or null for any local user (0666)
     */
    UnixSocketFile(Path path, String group) {
        this.path = path.toAbsolutePath().normalize();
        this.group = group;
    }

    /** @return the published path */
    Path path() {
        return path;
    }

    /**
     * Checks the directory (creating it when absent) and the path, then makes the private directory the socket is
     * bound in.
     *
     * @return the path to bind (inside the private directory); {@link #publish} moves it onto {@link #path()}
     * @throws IllegalStateException naming the path, when the directory or the file there is unsafe or taken
     */
    Path prepare() {
        Path dir = path.getParent();
        if (dir == null) {
            throw new IllegalStateException("socket path " + path + " has no directory");
        }
        checkDirectory(dir);
        checkExisting();
        byte[] r = new byte[6];
        new SecureRandom().nextBytes(r);
        Path tmp = dir.resolve(".gpusched-bind-" + HexFormat.of().formatHex(r));
        Path bind = tmp.resolve("s");
        if (bind.toString().getBytes(StandardCharsets.UTF_8).length > MAX_PATH_BYTES
                || path.toString().getBytes(StandardCharsets.UTF_8).length > MAX_PATH_BYTES) {
            throw new IllegalStateException("socket path " + path + " is too long for a Unix socket (at most "
                    + (MAX_PATH_BYTES - 25) + " bytes, so that the service can bind it beside the path first)");
        }
        try {
            Files.createDirectory(tmp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString(
                    "rwx------")));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + tmp + " to bind the socket in: " + e, e);
        }
        bindDir = tmp;
        return bind;
    }

    /**
     * Gives the bound socket its mode and group, then renames it onto {@link #path()}.
     *
     * @param bound the path the socket was bound at ({@link #prepare()}'s)
     * @throws IllegalStateException when the group does not exist
     * @throws UncheckedIOException when the mode, group or rename fails
     */
    void publish(Path bound) {
        try {
            // by path (chmod/chown; a socket cannot be opened for fchmod): safe, as nothing but this process can
            // write the private directory it is in
            PosixFileAttributeView view = Files.getFileAttributeView(bound, PosixFileAttributeView.class);
            if (group != null) {
                GroupPrincipal g;
                try {
                    g = bound.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByGroupName(group);
                } catch (UserPrincipalNotFoundException e) {
                    throw new IllegalStateException("--socket-group " + SampleHistory.printable(group)
                            + ": no such group on this host (getent group " + SampleHistory.printable(group)
                            + " finds none); create it or leave --socket-group out");
                }
                view.setGroup(g);
                view.setPermissions(PosixFilePermissions.fromString("rw-rw----"));
            } else {
                view.setPermissions(PosixFilePermissions.fromString("rw-rw-rw-"));
            }
            checkExisting(); // again, just before the rename: still nothing live, nothing but a socket
            try {
                Files.move(bound, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                throw new UncheckedIOException("cannot rename the socket onto " + path + ": " + e, e);
            }
            fileKey = Files.readAttributes(path, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot publish the socket at " + path + ": " + e, e);
        } finally {
            removeBindDir();
        }
    }

    /** Removes the private bind directory (and anything left in it); never throws. */
    void removeBindDir() {
        Path tmp = bindDir;
        if (tmp == null) {
            return;
        }
        try {
            Files.deleteIfExists(tmp.resolve("s"));
            Files.deleteIfExists(tmp);
            bindDir = null;
        } catch (IOException ignored) {
            // left behind: named .gpusched-bind-*, mode 0700; the next start does not depend on it
        }
    }

    /** Removes the published socket, if it is still the one this service published; never throws. */
    void remove() {
        removeBindDir();
        Object key = fileKey;
        if (key == null) {
            return;
        }
        try {
            PosixFileAttributes a = Files.readAttributes(path, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (key.equals(a.fileKey())) {
                Files.deleteIfExists(path);
            }
        } catch (IOException ignored) {
            // already gone, or replaced by another service: left alone
        }
        fileKey = null;
    }

    private void checkDirectory(Path dir) {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            try {
                Files.createDirectories(dir);
                Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
            } catch (FileAlreadyExistsException e) {
                // made by someone else meanwhile: checked below like any existing directory
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create the socket directory " + dir + ": " + e, e);
            }
        }
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the socket directory " + dir + ": " + e, e);
        }
        if (a.isSymbolicLink() || !a.isDirectory()) {
            throw new IllegalStateException("socket directory " + dir + " is " + kind(a) + ", not a directory;"
                    + " give --socket a path in a directory (not a link) that only root can write");
        }
        Set<PosixFilePermission> p = a.permissions();
        if (p.contains(PosixFilePermission.GROUP_WRITE) || p.contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new IllegalStateException("socket directory " + dir + " is writable by others (mode "
                    + PosixFilePermissions.toString(p) + "), so another user could replace the socket; give"
                    + " --socket a path in a directory only its owner can write (e.g. /run/gpusched)");
        }
        String owner = a.owner().getName();
        String me = System.getProperty("user.name");
        if (!owner.equals("root") && !owner.equals(me)) {
            throw new IllegalStateException("socket directory " + dir + " is owned by " + owner + ", not by root or "
                    + me + "; give --socket a path in a directory root owns");
        }
    }

    /** Refuses anything at the path but a socket nothing answers on. */
    private void checkExisting() {
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(path, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + path + ": " + e, e);
        }
        if (!a.isOther() || a.isSymbolicLink() || !isSocket(path)) {
            throw new IllegalStateException("socket path " + path + " is " + kind(a) + ", not a socket; it is left"
                    + " as it is (remove it yourself, or give --socket another path)");
        }
        try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            ch.connect(UnixDomainSocketAddress.of(path));
            throw new IllegalStateException("socket path " + path + " is in use: a service answers on it (stop it"
                    + " first, or give --socket another path)");
        } catch (IOException stale) {
            // nothing listens: a stale socket from a service that is gone, replaced by the rename
        }
    }

    /** @return whether the file is a socket (Files has no such test: its mode bits say, as stat(2) does) */
    private static boolean isSocket(Path p) {
        try {
            Object mode = Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS);
            return mode instanceof Integer m && (m & 0170000) == 0140000;
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return false;
        }
    }

    private static String kind(PosixFileAttributes a) {
        if (a.isSymbolicLink()) {
            return "a symbolic link";
        }
        if (a.isDirectory()) {
            return "a directory";
        }
        if (a.isRegularFile()) {
            return "a regular file";
        }
        return "a special file (FIFO or device)";
    }
}
