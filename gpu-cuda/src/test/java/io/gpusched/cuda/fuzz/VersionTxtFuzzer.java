package io.gpusched.cuda.fuzz;

import io.gpusched.cuda.internal.VersionFiles;

/**
 * Fuzz target for {@link VersionFiles#fromVersionTxt(String)}, the reader of an installation's version.txt (CUDA up to 11.0): a valid version,
 * empty, or IllegalArgumentException naming version.txt and the expected form; nothing else.
 */
public final class VersionTxtFuzzer {
    private VersionTxtFuzzer() {
    }

    /** One input: the file's bytes. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = CudaContract.text(input);
        CudaContract.version(s, "version.txt", () -> VersionFiles.fromVersionTxt(s));
    }
}
