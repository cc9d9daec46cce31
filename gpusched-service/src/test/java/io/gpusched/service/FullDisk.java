package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * A small tmpfs (512 KiB) mounted over a directory, such as a service's {@code jobs} directory, that a test fills up
 * (as another user's output or anyone's files on the same file system would) and frees again; unmounted on close.
 * Needs root.
 */
public final class FullDisk implements AutoCloseable {
    /** The directory the tmpfs is mounted on. */
    public final Path dir;
    private final Path filler;

    private FullDisk(Path dir) {
        this.dir = dir;
        this.filler = dir.resolve("filler");
    }

    /**
     * Makes {@code dir} (and its parents) and mounts the tmpfs on it ({@code mode=0711}, as the service makes its jobs
     * directory).
     *
     * @param name the mount's source name, seen in {@code /proc/mounts} (the test's, to tell leftovers apart)
     */
    public static FullDisk over(Path dir, String name) throws IOException {
        Files.createDirectories(dir);
        LocalUsers.Result m = LocalUsers.run(List.of("mount", "-t", "tmpfs", "-o", "size=512k,mode=0711", name,
                dir.toString()), 30);
        assertThat(m.exit()).as("mount a tmpfs on %s: %s", dir, m.err()).isZero();
        return new FullDisk(dir);
    }

    /** Writes a file until the disk refuses ({@code ENOSPC}). */
    public void fill() throws IOException {
        try (OutputStream f = Files.newOutputStream(filler)) {
            byte[] b = new byte[4096];
            while (true) {
                f.write(b);
                f.flush();
            }
        } catch (IOException full) {
            // no space left
        }
    }

    /** Deletes what {@link #fill} wrote: the disk has room again. */
    public void free() throws IOException {
        Files.deleteIfExists(filler);
    }

    /** Unmounts it (lazily: a file the service still holds open does not keep it mounted). */
    @Override
    public void close() throws IOException {
        LocalUsers.run(List.of("umount", "-l", dir.toString()), 30);
    }
}
