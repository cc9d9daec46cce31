package io.gpusched.core.host;

import io.gpusched.core.GpuException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * Writes a configuration file that another program reads (a CDI spec in {@code /etc/cdi}, a {@code gres.conf}):
 * whole or not at all (a temporary file in the same directory, forced to disk, then renamed over the old one), into a
 * directory only its owner may write (a directory writable by others would let them swap the file under the reader).
 */
public final class ConfigFiles {
    private ConfigFiles() {
    }

    /**
     * Writes {@code body} to {@code dir/name} atomically with mode 0644, creating {@code dir} (0755) if absent.
     *
     * @return the file written
     * @throws GpuException when the name is not a plain file name, the directory is writable by its group or by others
     *                      (or is a symbolic link), or the write fails; the old file is then untouched
     */
    public static Path writeAtomically(Path dir, String name, byte[] body) {
        if (name.isEmpty() || name.contains("/") || name.startsWith(".")) {
            throw new GpuException("file name \"" + name + "\" is not a plain file name; expected a name such as"
                    + " gpusched-nvidia.json");
        }
        try {
            if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwxr-xr-x")));
            }
            checkOwnerOnly(dir);
            Path target = dir.resolve(name);
            Path tmp = dir.resolve("." + name + ".tmp");
            Files.deleteIfExists(tmp);
            try (FileChannel ch = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-r--r--")))) {
                ByteBuffer b = ByteBuffer.wrap(body);
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                ch.force(true);
            } catch (IOException e) {
                Files.deleteIfExists(tmp);
                throw e;
            }
            // the umask may have narrowed the mode: readers (podman, slurmd as another user) need to read it
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            } catch (IOException e) {
                // some file systems cannot sync a directory; the rename itself is atomic
            }
            return target;
        } catch (IOException e) {
            throw new GpuException("cannot write " + dir.resolve(name) + ": " + e, e);
        }
    }

    /**
     * @throws GpuException when {@code dir} is a symbolic link, not a directory, or writable by its group or others
     */
    public static void checkOwnerOnly(Path dir) {
        try {
            if (Files.isSymbolicLink(dir)) {
                throw new GpuException("refusing to write into " + dir + ": it is a symbolic link; give the real"
                        + " directory");
            }
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                throw new GpuException("refusing to write into " + dir + ": not a directory");
            }
            Set<PosixFilePermission> p = Files.getPosixFilePermissions(dir, LinkOption.NOFOLLOW_LINKS);
            if (p.contains(PosixFilePermission.GROUP_WRITE) || p.contains(PosixFilePermission.OTHERS_WRITE)) {
                throw new GpuException("refusing to write into " + dir + ": it is writable by "
                        + (p.contains(PosixFilePermission.OTHERS_WRITE) ? "other users" : "its group") + " (mode "
                        + PosixFilePermissions.toString(p) + "), who could replace the file its reader trusts; run"
                        + " chmod go-w " + dir + " or choose another directory");
            }
        } catch (IOException e) {
            throw new GpuException("cannot read the permissions of " + dir + ": " + e, e);
        }
    }
}
