// libgit2's static archive carries its HTTP transport, whose "Negotiate" authentication
// calls GSSAPI (Kerberos). cairn never talks to a remote: code snapshots are local commits.
// Rather than make the executable depend on libgssapi_krb5 (which the machines a static
// cairn is copied to may lack), these definitions satisfy the linker and fail any call,
// which libgit2 would report as an authentication error. Nothing in cairn reaches them.
#include <cstdint>

extern "C" {

using OM_uint32 = uint32_t;
constexpr OM_uint32 kGssFailure = 13u << 16;  // GSS_S_FAILURE

struct gss_OID_desc_struct {
  OM_uint32 length;
  void* elements;
};
gss_OID_desc_struct cairn_no_gss_oid = {0, nullptr};
gss_OID_desc_struct* GSS_C_NT_HOSTBASED_SERVICE = &cairn_no_gss_oid;

static OM_uint32 fail(OM_uint32* minor) {
  if (minor) *minor = 0;
  return kGssFailure;
}

OM_uint32 gss_display_status(OM_uint32* minor, OM_uint32, int, void*, OM_uint32*, void*) {
  return fail(minor);
}
OM_uint32 gss_release_buffer(OM_uint32* minor, void*) {
  return fail(minor);
}
OM_uint32 gss_delete_sec_context(OM_uint32* minor, void*, void*) {
  return fail(minor);
}
OM_uint32 gss_import_name(OM_uint32* minor, void*, void*, void*) {
  return fail(minor);
}
OM_uint32 gss_release_name(OM_uint32* minor, void*) {
  return fail(minor);
}
OM_uint32 gss_init_sec_context(OM_uint32* minor, void*, void*, void*, void*, OM_uint32, OM_uint32,
                               void*, void*, void*, void*, OM_uint32*, OM_uint32*) {
  return fail(minor);
}
OM_uint32 gss_indicate_mechs(OM_uint32* minor, void*) {
  return fail(minor);
}
OM_uint32 gss_release_oid_set(OM_uint32* minor, void*) {
  return fail(minor);
}

}  // extern "C"
