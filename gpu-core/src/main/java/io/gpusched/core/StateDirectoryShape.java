package io.gpusched.core;

import io.gpusched.core.LedgerException.Kind;
import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * What a writer's state directory must be before anything is created in it: a name (an empty one would be the working
 * directory), and a directory, or nothing yet (then it is created), or a symbolic link to a directory (a host may name
 * its state directory through a link; the writer then uses the link's target, checked as any directory). A regular
 * file, FIFO, device, socket or dangling link is refused with {@link Kind#NOT_A_DIRECTORY} before anything is written,
 * and the operating system's refusals are {@link Kind#PERMISSION_DENIED}, naming the path, the user and what works.
 */
final class StateDirectoryShape {
    private StateDirectoryShape() {
    }

    /**
     * @param given the state directory as given
     * @return the directory a writer uses: {@code given} made absolute, or the target of the link it is
     * @throws LedgerException {@code NOT_A_DIRECTORY} for an empty name, something that is not a directory or a link to
     *                         nothing; {@code PERMISSION_DENIED} when the path cannot be looked at
     */
    static Path forWriter(Path given) {
        if (given.toString().isEmpty()) {
            throw new LedgerException(Kind.NOT_A_DIRECTORY, given, "the state directory is an empty name, which would"
                    + " put the node ledger in the working directory; give a directory such as /var/lib/gpusched"
                    + " (--state-dir, GPUSCHED_STATE_DIR, gpu.state_dir), or leave it out for the default", null);
        }
        Path dir = given.toAbsolutePath().normalize();
        BasicFileAttributes a;
        try {
            a = Files.readAttributes(dir, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            refuseAncestorInTheWay(dir);
            return dir; // created by the writer
        } catch (AccessDeniedException e) {
            throw LedgerException.io("cannot look at the state directory " + dir, dir, e);
        } catch (IOException e) {
            refuseAncestorInTheWay(dir); // "Not a directory": a file where a directory of the path should be
            throw LedgerException.io("cannot look at the state directory " + dir, dir, e);
        }
        if (a.isDirectory()) {
            return dir;
        }
        if (!a.isSymbolicLink()) {
            throw notADirectory(dir, dir);
        }
        Path target;
        try {
            target = dir.toRealPath();
        } catch (NoSuchFileException e) {
            throw new LedgerException(Kind.NOT_A_DIRECTORY, dir,
                    "the state directory " + dir + " is a symbolic link to "
                            + linkText(dir)
                            + ", which does not exist; nothing is created through a dangling link: create the"
                            + " target directory, or give a directory itself",
                    null);
        } catch (IOException e) {
            throw LedgerException.io("cannot follow the state directory's link " + dir, dir, e);
        }
        if (!Files.isDirectory(target, LinkOption.NOFOLLOW_LINKS)) {
            throw new LedgerException(Kind.NOT_A_DIRECTORY, dir,
                    "the state directory " + dir + " is a symbolic link to "
                            + target + ", which is not a directory; give a directory, such as /var/lib/gpusched",
                    null);
        }
        return target;
    }

    /** Refuses a state directory to be created below something that is not a directory (or a link to none). */
    private static void refuseAncestorInTheWay(Path dir) {
        for (Path p = dir.getParent(); p != null; p = p.getParent()) {
            if (Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
                if (!Files.isDirectory(p)) {
                    throw notADirectory(dir, p);
                }
                return;
            }
        }
    }

    /** @return {@code NOT_A_DIRECTORY} for the state directory {@code dir}, where {@code at} is in the way */
    static LedgerException notADirectory(Path dir, Path at) {
        return new LedgerException(Kind.NOT_A_DIRECTORY, dir, "the state directory " + dir + (at.equals(dir) ? " is "
                : " cannot be created: " + at + " is ") + kindOf(at) + ", not a directory; give a directory (it is"
                + " created when absent), such as /var/lib/gpusched", null);
    }

    private static String kindOf(Path p) {
        try {
            BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (a.isSymbolicLink()) {
                return "a symbolic link to " + linkText(p) + (Files.exists(p) ? "" : " (which does not exist)");
            }
            if (a.isRegularFile()) {
                return "a regular file";
            }
            return a.isOther() ? "a FIFO, socket or device" : "something else";
        } catch (IOException e) {
            return "something this process cannot look at (" + e.getClass().getSimpleName() + ")";
        }
    }

    private static String linkText(Path link) {
        try {
            return Files.readSymbolicLink(link).toString();
        } catch (IOException | UnsupportedOperationException e) {
            return "?";
        }
    }

    /** @return this process's uid, or -1 where the system does not say */
    static int myUid() {
        try {
            return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return -1;
        }
    }

    /**
     * @return {@code " (<p> is owned by uid N, mode rwx------)"} for {@code p} or its nearest existing ancestor, or
     *         empty where that cannot be read
     */
    static String describeOwner(Path p) {
        for (Path q = p.toAbsolutePath(); q != null; q = q.getParent()) {
            try {
                int uid = (Integer) Files.getAttribute(q, "unix:uid", LinkOption.NOFOLLOW_LINKS);
                String mode = PosixFilePermissions.toString(Files.getPosixFilePermissions(q,
                        LinkOption.NOFOLLOW_LINKS));
                return " (" + q + " is owned by uid " + uid + ", mode " + mode + ")";
            } catch (NoSuchFileException e) {
                continue;
            } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
                return "";
            }
        }
        return "";
    }
}
