package io.gpusched.core.internal;

import io.gpusched.core.GpuConfigException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * The one reader for files a user names (a configuration, a node description, a workflow, a {@code gres.conf} to
 * check): a regular file of at most {@link #MAX_BYTES} bytes, UTF-8. Anything else is refused before it is opened
 * (opening a FIFO blocks until a writer comes; {@code /dev/zero} reports size 0 and never ends), and the read itself
 * stops after {@link #MAX_BYTES} + 1 bytes whatever the size said. Internal: not part of the API.
 */
public final class TextFiles {
    /** Largest file read: 3 MiB (SnakeYAML's own limit is 3 Mi code points). */
    public static final long MAX_BYTES = 3L << 20;

    private TextFiles() {
    }

    /**
     * Reads a user's text file.
     *
     * @param file the file (links are followed: the file they lead to must be regular)
     * @param what names the file in errors ("workflow file", "gres.conf")
     * @return its text
     * @throws GpuConfigException naming the file and what would be valid when it is missing, not a regular file,
     *                            larger than {@link #MAX_BYTES}, unreadable or not UTF-8
     */
    public static String readUtf8(Path file, String what) {
        byte[] bytes = readBytes(file, what);
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            throw new GpuConfigException("cannot read " + what + " " + Printable.escape(file.toString())
                    + ": not UTF-8 text (a binary file?); expected a UTF-8 text file", e);
        }
    }

    /**
     * @return the file's bytes
     * @throws GpuConfigException as {@link #readUtf8}, but for the encoding
     */
    public static byte[] readBytes(Path file, String what) {
        String name = what + " " + Printable.escape(file.toString());
        BasicFileAttributes a;
        try {
            a = Files.readAttributes(file, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new GpuConfigException("cannot read " + name + ": no such file", e);
        } catch (IOException e) {
            throw new GpuConfigException("cannot read " + name + ": " + Printable.escape(String.valueOf(e)), e);
        }
        if (!a.isRegularFile()) {
            throw new GpuConfigException("cannot read " + name + ": not a regular file (" + kind(a) + "); expected a"
                    + " regular file of at most " + MAX_BYTES + " bytes");
        }
        if (a.size() > MAX_BYTES) {
            throw new GpuConfigException("cannot read " + name + ": " + a.size() + " bytes; expected at most "
                    + MAX_BYTES);
        }
        byte[] bytes;
        try (InputStream in = Files.newInputStream(file)) {
            bytes = in.readNBytes((int) MAX_BYTES + 1);
        } catch (IOException e) {
            throw new GpuConfigException("cannot read " + name + ": " + Printable.escape(String.valueOf(e)), e);
        }
        if (bytes.length > MAX_BYTES) {
            throw new GpuConfigException("cannot read " + name + ": more than " + MAX_BYTES + " bytes; expected at"
                    + " most " + MAX_BYTES);
        }
        return bytes;
    }

    private static String kind(BasicFileAttributes a) {
        if (a.isDirectory()) {
            return "a directory";
        }
        return a.isOther() ? "a FIFO, socket or device" : "not a plain file";
    }
}
