package io.gpusched.client;

import java.util.Optional;

/**
 * How an attached job ended.
 *
 * @param code   its exit code ({@code 128 + n} when signal {@code n} ended it, as a shell reports it)
 * @param signal the signal that ended it ({@code KILL}, {@code TERM}, ...), if one did
 */
public record JobExit(int code, Optional<String> signal) {
}
