package io.gpusched.examples;

import java.util.Optional;

/**
 * The README's first command as an IDE example: detect this node's GPUs (none? it simulates a DGX-1 and says so),
 * show devices and the link matrix, allocate a handful of requests and release them. {@code ./gpusched demo} runs
 * the same code.
 */
public final class Demo {
    private Demo() {
    }

    /** @param args ignored */
    public static void main(String[] args) {
        System.exit(io.gpusched.cli.Demo.run(System.out, Optional.empty()));
    }
}
