/**
 * Not API: helpers gpusched's own modules share (duration parsing, the JSON mapper, strict YAML, PCI sysfs reading,
 * the NVIDIA driver's version). Exported only to those modules in {@code module-info.java}; may change in any release.
 */
package io.gpusched.core.internal;
