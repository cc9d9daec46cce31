package io.gpusched.cuda.fuzz;

import io.gpusched.cuda.internal.VersionFiles;

/**
 * Fuzz target for {@link VersionFiles#fromVersionJson(String)}, the reader of an installation's version.json (CUDA 11.1 on): a valid version,
 * empty, or IllegalArgumentException naming version.json and the expected form; nothing else.
 */
public final class VersionJsonFuzzer {
    private VersionJsonFuzzer() {
    }

    /** One input: the file's bytes. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = CudaContract.text(input);
        CudaContract.version(s, "version.json", () -> VersionFiles.fromVersionJson(s));
    }
}
