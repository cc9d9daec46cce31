package io.gpusched.cuda.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.internal.Json;
import io.gpusched.cuda.CudaVersion;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads a CUDA version out of the texts an installation carries: {@code version.json}, {@code version.txt},
 * {@code cuda.h}, a {@code libcudart.so.X.Y.Z} file name and a pip wheel's {@code dist-info} directory name. Pure
 * functions over text, so that hostile files can be fuzzed without a disk. Each method returns empty when the text
 * has no version in its form and throws {@link IllegalArgumentException} (naming the text and the expected form)
 * when it has one that is not a valid CUDA version; no other exception is thrown for any text. Internal.
 */
public final class VersionFiles {

    /** Longest text read from a version file; CUDA's own are a few KiB ({@code cuda.h} about 1 MiB). */
    public static final int MAX_TEXT = 4 << 20;

    private static final Pattern VERSION_TXT = Pattern.compile("CUDA Version\\s+([0-9]{1,9}\\.[0-9]{1,9}(?:\\.[0-9]{"
            + "1,12})?)");
    private static final Pattern CUDA_H = Pattern.compile("#define[ \\t]+CUDA_VERSION[ \\t]+([0-9]{4,6})\\b");
    private static final Pattern SONAME = Pattern.compile("libcudart\\.so\\.([0-9]{1,9})(?:\\.([0-9]{1,9})(?:\\.([0-"
            + "9]{1,12}))?)?");
    private static final Pattern PIP_RUNTIME =
            Pattern.compile("nvidia_cuda_runtime(?:_cu[0-9]{1,3})?-([0-9]{1,9}\\.[0-9]{1,9}(?:\\.[0-9]{1,12})?)\\.di"
                    + "st-info");

    private VersionFiles() {
    }

    /**
     * {@code version.json} (CUDA 11.1 on): {@code cuda_cudart.version}, else {@code cuda.version}.
     *
     * @return empty when neither key holds a text
     * @throws IllegalArgumentException if the text is not JSON or the version is not a CUDA version
     */
    public static Optional<CudaVersion> fromVersionJson(String text) {
        JsonNode n;
        try {
            n = Json.MAPPER.readTree(bounded(text, "version.json"));
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("version.json is not JSON (" + firstLine(e.getOriginalMessage())
                    + "); expected {\"cuda\": {\"version\": \"12.4.1\"}, \"cuda_cudart\": {\"version\": \"12.4.127\"}}",
                    e);
        }
        if (n == null) {
            return Optional.empty();
        }
        for (JsonNode v : new JsonNode[]{n.path("cuda_cudart").path("version"), n.path("cuda").path("version")}) {
            if (v.isTextual()) {
                return Optional.of(parse(v.asText(), "version.json"));
            }
        }
        return Optional.empty();
    }

    /** {@code version.txt} (CUDA up to 11.0): {@code CUDA Version 10.2.89}. @return empty when no such line */
    public static Optional<CudaVersion> fromVersionTxt(String text) {
        Matcher m = VERSION_TXT.matcher(bounded(text, "version.txt"));
        return m.find() ? Optional.of(parse(m.group(1), "version.txt")) : Optional.empty();
    }

    /** {@code cuda.h}: {@code #define CUDA_VERSION 12040}. @return empty when no such line */
    public static Optional<CudaVersion> fromCudaHeader(String text) {
        Matcher m = CUDA_H.matcher(bounded(text, "cuda.h"));
        if (!m.find()) {
            return Optional.empty();
        }
        int api = Integer.parseInt(m.group(1));
        if (api < 1000) {
            throw new IllegalArgumentException("cuda.h defines CUDA_VERSION " + m.group(1) + ", which is not of the"
                    + " form 1000 * major + 10 * minor; expected e.g. \"#define CUDA_VERSION 12040\"");
        }
        return Optional.of(CudaVersion.fromApiInt(api));
    }

    /**
     * A runtime library's file name: {@code libcudart.so.12.4.127}, {@code libcudart.so.12} (minor 0).
     *
     * @return empty when the name is not a libcudart name
     */
    public static Optional<CudaVersion> fromCudartName(String fileName) {
        Matcher m = SONAME.matcher(fileName);
        if (!m.matches()) {
            return Optional.empty();
        }
        String v = m.group(1) + "." + (m.group(2) == null ? "0" : m.group(2))
                + (m.group(3) == null ? "" : "." + m.group(3));
        return Optional.of(parse(v, "library " + fileName));
    }

    /** @return true if the file name is a libcudart name ({@code libcudart.so.N...}) */
    public static boolean isCudartName(String fileName) {
        return SONAME.matcher(fileName).matches();
    }

    /**
     * A pip wheel's metadata directory: {@code nvidia_cuda_runtime_cu12-12.1.105.dist-info}.
     *
     * @return empty when the name is not such a directory
     */
    public static Optional<CudaVersion> fromPipDistInfo(String dirName) {
        Matcher m = PIP_RUNTIME.matcher(dirName);
        return m.matches() ? Optional.of(parse(m.group(1), "pip metadata " + dirName)) : Optional.empty();
    }

    private static CudaVersion parse(String v, String where) {
        try {
            return CudaVersion.parse(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
        }
    }

    private static String bounded(String text, String what) {
        if (text.length() > MAX_TEXT) {
            throw new IllegalArgumentException(what + " is " + text.length() + " characters; expected at most "
                    + MAX_TEXT + " (a CUDA version file)");
        }
        return text;
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }
}
