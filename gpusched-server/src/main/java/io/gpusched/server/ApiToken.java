package io.gpusched.server;

import java.io.IOException;
import java.nio.channels.Channels;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Set;

/**
 * The console's bearer token: 32 random bytes (hex) in {@code console.token} in the state directory, created with
 * mode 0600 on first start. A token file that group or others may read or write is refused: whoever can read it
 * can change the node's allocations.
 */
public final class ApiToken {
    /** The token file's name in the state directory. */
    public static final String FILE_NAME = "console.token";

    private final byte[] token;
    private final Path file;

    private ApiToken(byte[] token, Path file) {
        this.token = token;
        this.file = file;
    }

    /**
     * Reads the token of a state directory, creating it (0600) when absent.
     *
     * @param stateDir the state directory (created when missing, 0700)
     * @return the token
     * @throws IllegalStateException when the file is readable or writable by group or others, a symbolic link or not a
     *     regular file, empty or unreadable, or when the state directory is writable by group or others
     */
    public static ApiToken loadOrCreate(Path stateDir) {
        Path file = stateDir.resolve(FILE_NAME);
        try {
            if (!Files.isDirectory(stateDir)) {
                Files.createDirectories(stateDir, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwx------")));
            }
            Set<PosixFilePermission> dirPerms = Files.getPosixFilePermissions(stateDir);
            if (dirPerms.contains(PosixFilePermission.GROUP_WRITE)
                    || dirPerms.contains(PosixFilePermission.OTHERS_WRITE)) {
                throw new IllegalStateException("the state directory " + stateDir + " has mode "
                        + PosixFilePermissions.toString(dirPerms) + ", so other users may replace the console token"
                        + " file in it; make it writable by its owner only (chmod go-w " + stateDir + ")");
            }
            if (!Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
                byte[] raw = new byte[32];
                new SecureRandom().nextBytes(raw);
                try {
                    Files.createFile(file, PosixFilePermissions.asFileAttribute(
                            PosixFilePermissions.fromString("rw-------")));
                    Files.writeString(file, HexFormat.of().formatHex(raw) + "\n", StandardCharsets.US_ASCII);
                } catch (FileAlreadyExistsException raced) {
                    // another console created it first: read theirs below
                }
            }
            PosixFileAttributes attrs = Files.readAttributes(file, PosixFileAttributes.class,
                    LinkOption.NOFOLLOW_LINKS);
            if (!attrs.isRegularFile()) {
                throw new IllegalStateException("the console token file " + file + " is "
                        + (attrs.isSymbolicLink() ? "a symbolic link" : "not a regular file") + "; it must be a plain"
                        + " file (0600) in the state directory: delete it to have a new one made");
            }
            Set<PosixFilePermission> perms = attrs.permissions();
            for (PosixFilePermission p : perms) {
                if (p.name().startsWith("GROUP") || p.name().startsWith("OTHERS")) {
                    throw new IllegalStateException("the console token file " + file + " has mode "
                            + PosixFilePermissions.toString(perms) + ", so other users may read or change it;"
                            + " make it rw------- (chmod 600 " + file + ") or delete it to have a new one made");
                }
            }
            String text;
            // no link is followed even if one replaced the file since the check above
            try (SeekableByteChannel ch = Files.newByteChannel(file,
                    Set.of(StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS))) {
                text = new String(Channels.newInputStream(ch).readNBytes(4096),
                        StandardCharsets.US_ASCII).strip();
            }
            if (text.length() < 32) {
                throw new IllegalStateException("the console token file " + file + " holds no token (fewer than 32"
                        + " characters); delete it to have a new one made");
            }
            return new ApiToken(text.getBytes(StandardCharsets.US_ASCII), file);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read or create the console token file " + file + ": " + e, e);
        }
    }

    /** @return the token file */
    public Path file() {
        return file;
    }

    /** @return the token text, for clients started by this process (tests, the CLI) */
    public String value() {
        return new String(token, StandardCharsets.US_ASCII);
    }

    /**
     * @param authorization an {@code Authorization} header value, or null
     * @return whether it is {@code Bearer <this token>} (compared in constant time)
     */
    public boolean accepts(String authorization) {
        if (authorization == null || !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
            return false;
        }
        byte[] given = authorization.substring(7).strip().getBytes(StandardCharsets.US_ASCII);
        return MessageDigest.isEqual(given, token);
    }
}
