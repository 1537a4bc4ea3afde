// TfIdfVectorizer over string tokens (scikit-learn's text pipelines export it so): each token becomes the id of
// its entry in pool_strings by a LabelEncoder (tokens outside the pool: -1, which no n-gram holds), and Cuvil's
// TfIdfVectorizer counts the ids. Integer tokens go to the op as they are.
#include <map>

#include "frontend/onnx/converter.h"

namespace cuvil {

namespace {

void convert_tfidf_vectorizer(ConvertContext& c) {
  Value* x = c.input(0);
  auto pool = c.attrs().find("pool_strings");
  if (!x || x->dtype() != DType::str || pool == c.attrs().end()) return void(c.emit(OpKind::TfIdfVectorizer));
  if (pool->second.kind() != AttrKind::Strings) c.error("attribute 'pool_strings' must be a list of strings");
  if (c.has_attr("pool_int64s") && !c.attrs().at("pool_int64s").ints().empty())
    c.error("both 'pool_strings' and 'pool_int64s' are set");
  std::map<std::string, int64_t> ids;  // each distinct pool string one id
  std::vector<int64_t> pool_ids;
  for (const std::string& s : pool->second.strings()) pool_ids.push_back(ids.emplace(s, int64_t(ids.size())).first->second);
  std::vector<std::string> keys(ids.size());
  std::vector<int64_t> values(ids.size());
  for (const auto& [s, id] : ids) {
    keys[size_t(id)] = s;
    values[size_t(id)] = id;
  }
  int64_t n = int64_t(keys.size());
  Value* tokens = c.emit_temp(OpKind::LabelEncoder, {x},
                              {{"keys", Attribute(Tensor::strings(keys, {n}))},
                               {"values", Attribute(Tensor::from_vector<int64_t>(values, {n}))},
                               {"default", Attribute(Tensor::scalar<int64_t>(-1))}})
                      ->output(0);
  AttrMap attrs = c.attrs();
  attrs.erase("pool_strings");
  attrs["pool_int64s"] = Attribute(pool_ids);
  c.emit_final(OpKind::TfIdfVectorizer, {tokens}, std::move(attrs));
}

}  // namespace

void register_onnx_text(OnnxConverterTable& t) { t["TfIdfVectorizer"] = convert_tfidf_vectorizer; }

}  // namespace cuvil
