package io.gpusched.core;

import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Objects;

/**
 * The node ledger (a scheduler's state directory, see {@link GpuScheduler.Builder#stateDir(Path)}) could not be used:
 * the change that met it did not happen, and the scheduler's state is as it was before the change.
 */
public class LedgerException extends GpuException {

    /** What went wrong. */
    public enum Kind {
        /** The disk holding the ledger is full; nothing was written. */
        NO_SPACE,
        /** Reading or writing the ledger failed for another I/O reason. */
        IO,
        /** A record in the middle of the ledger is damaged; the ledger is not opened. */
        CORRUPT,
        /** The ledger was written by a newer gpusched format; it is not read. */
        NEWER_FORMAT,
        /**
         * A reader cannot read the ledger: its user may not read the state directory or the ledger file, or there is
         * no ledger where it looked.
         */
        UNREADABLE,
        /** The state directory or a ledger file may be written by other users; it is not trusted. */
        INSECURE_PERMISSIONS,
        /** The ledger describes another node (a simulated node and a real one, or other GPUs); it is not opened. */
        NODE_MISMATCH,
        /**
         * An earlier gpusched kept this node's ledger in a subdirectory ({@code <state dir>/<backend>/}) and the state
         * directory now has a ledger of its own: two records of one node; it is not opened until one is removed.
         */
        LEGACY_LEDGER,
        /**
         * The path given as the state directory is not a directory: a regular file, a FIFO, a device or a socket, or
         * an empty name (which would be the working directory).
         */
        NOT_A_DIRECTORY,
        /**
         * This process's user may not create or write the state directory or a file in it (the operating system
         * refused); nothing was written.
         */
        PERMISSION_DENIED
    }

    private final Kind kind;
    private final Path path;

    /**
     * @param kind    what went wrong
     * @param path    the file or directory concerned
     * @param message a sentence naming the path and what to do
     * @param cause   the underlying error, or null
     */
    public LedgerException(Kind kind, Path path, String message, Throwable cause) {
        super(message, cause);
        this.kind = Objects.requireNonNull(kind, "kind");
        this.path = Objects.requireNonNull(path, "path");
    }

    /**
     * @return {@code NO_SPACE} when the disk is full, else {@code IO}, naming {@code what} failed on {@code p} and
     *         the cause
     */
    static LedgerException io(String what, Path p, IOException e) {
        if (e instanceof AccessDeniedException) {
            Path at = e instanceof FileSystemException f && f.getFile() != null ? Path.of(f.getFile()) : p;
            return new LedgerException(Kind.PERMISSION_DENIED, p, what + ": permission denied on " + at + " for uid "
                    + StateDirectoryShape.myUid() + StateDirectoryShape.describeOwner(at) + "; give a state"
                    + " directory this user may create and write (--state-dir, GPUSCHED_STATE_DIR, gpu.state_dir), or"
                    + " run as the directory's owner", e);
        }
        if (e instanceof FileAlreadyExistsException f) {
            return StateDirectoryShape.notADirectory(p, f.getFile() != null ? Path.of(f.getFile()) : p);
        }
        boolean full = String.valueOf(e.getMessage()).contains("No space left");
        return new LedgerException(full ? Kind.NO_SPACE : Kind.IO, p, what + ": " + describe(e), e);
    }

    /** @return what the system said, as a person reads it: the file and the reason, no Java class names */
    static String describe(IOException e) {
        if (e instanceof NoSuchFileException f) {
            return (f.getFile() != null ? f.getFile() : "a path") + ": no such file or directory"
                    + (f.getReason() != null ? " (" + f.getReason() + ")" : "");
        }
        if (e instanceof FileSystemException f) {
            String reason = f.getReason() != null ? f.getReason() : "the system refused";
            return (f.getFile() != null ? f.getFile() : "a path") + ": " + reason
                    + (f.getOtherFile() != null ? " (" + f.getOtherFile() + ")" : "");
        }
        return e.getMessage() != null ? e.getMessage() : "an I/O error";
    }

    /** @return what went wrong */
    public Kind kind() {
        return kind;
    }

    /** @return the file or directory concerned */
    public Path path() {
        return path;
    }
}
