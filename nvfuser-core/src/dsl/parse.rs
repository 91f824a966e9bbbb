//! Parsing `fusion!` items: signatures and layouts here, bodies in [`super::lower`].
//!
//! One parser serves both front ends: it runs on a `proc_macro2::TokenStream` (the
//! macro) or on a string (run time), through `syn::parse::Parser`. Signatures are parsed
//! by hand because `Tensor<bf16, [N, H]>` is not a Rust type; bodies are ordinary Rust
//! blocks, parsed by syn and then lowered. Syntax errors stop parsing (syn reports the
//! first); everything else (unknown dtypes, unsupported constructs, bad layouts) is
//! recorded and parsing goes on.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::{bracketed, parenthesized, Token};

use super::ast::{
    ContiguitySpec, Dim, DimKind, FusionFn, Layout, Name, Param, ParamType, ReturnType, TensorType,
};
use super::error::{from_syn, DslError, SpanRange};
use super::lower::{dtype_of, lower_block};
use super::ops::closest;
use crate::dtype::DataType;

/// Parses items, keeping the AST of everything that parsed and every error found.
pub(crate) fn parse_partial(tokens: TokenStream) -> (Vec<FusionFn>, Vec<DslError>) {
    // syn recurses on nesting: refuse deep input before it gets there.
    if let Err(e) = super::depth::check_tokens(&tokens) {
        return (Vec::new(), vec![e]);
    }
    let mut errors = Vec::new();
    let parsed = (|input: ParseStream| parse_items(input, &mut errors)).parse2(tokens);
    match parsed {
        Ok(fns) => (fns, errors),
        Err(e) => {
            errors.extend(from_syn(e));
            (Vec::new(), errors)
        }
    }
}

fn name_of(ident: &syn::Ident) -> Name {
    Name {
        text: ident.to_string(),
        span: SpanRange::single(ident.span()),
    }
}

fn parse_items(input: ParseStream, errors: &mut Vec<DslError>) -> syn::Result<Vec<FusionFn>> {
    // An optional `fusion! { ... }` (or `nvfuser::fusion! { ... }`) wrapper, so that a
    // reproducer pasted with its macro call parses as well.
    if input.peek(syn::Ident) && (input.peek2(Token![!]) || input.peek2(Token![::])) {
        let path: syn::Path = input.parse()?;
        let last = path.segments.last().map(|s| s.ident.to_string());
        if last.as_deref() != Some("fusion") {
            return Err(syn::Error::new_spanned(
                path,
                "expected `fn` items or a `fusion! { ... }` block",
            ));
        }
        input.parse::<Token![!]>()?;
        let content;
        if input.peek(syn::token::Brace) {
            syn::braced!(content in input);
        } else if input.peek(syn::token::Paren) {
            parenthesized!(content in input);
        } else {
            bracketed!(content in input);
        }
        let _ = input.parse::<Option<Token![;]>>()?;
        let fns = parse_items(&content, errors)?;
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the `fusion!` block"));
        }
        return Ok(fns);
    }
    let mut fns = Vec::new();
    while !input.is_empty() {
        fns.push(parse_fn(input, errors)?);
    }
    if fns.is_empty() {
        return Err(input.error("expected at least one `fn` item"));
    }
    Ok(fns)
}

fn parse_fn(input: ParseStream, errors: &mut Vec<DslError>) -> syn::Result<FusionFn> {
    let attrs = input.call(syn::Attribute::parse_outer)?;
    let mut docs = Vec::new();
    for attr in &attrs {
        match doc_text(attr) {
            Some(text) => docs.push(text),
            None => errors.push(
                DslError::new(
                    SpanRange::of(attr),
                    "only doc comments (`///`) are allowed on a fusion fn",
                )
                .with_hint("remove the attribute"),
            ),
        }
    }
    let vis: syn::Visibility = input.parse()?;
    loop {
        let what = if input.peek(Token![const]) {
            "const"
        } else if input.peek(Token![async]) {
            "async"
        } else if input.peek(Token![unsafe]) {
            "unsafe"
        } else if input.peek(Token![extern]) {
            "extern"
        } else {
            break;
        };
        let tt: proc_macro2::TokenTree = input.parse()?;
        if what == "extern" && input.peek(syn::LitStr) {
            input.parse::<syn::LitStr>()?;
        }
        errors.push(
            DslError::new(
                SpanRange::of(&tt),
                format!("`{what}` fusion fns are not supported"),
            )
            .with_hint(format!(
                "remove `{what}`: a fusion fn is plain `fn` or `pub fn`"
            )),
        );
    }
    let fn_token: Token![fn] = input.parse()?;
    let ident: syn::Ident = input.parse()?;
    if input.peek(Token![<]) {
        let generics: syn::Generics = input.parse()?;
        errors.push(
            DslError::new(
                SpanRange::of(&generics),
                "generic parameters are not supported on a fusion fn",
            )
            .with_hint("dims are symbolic already: write `Tensor<f32, [N, H]>` and name the dims"),
        );
    }
    let content;
    parenthesized!(content in input);
    let mut params = Vec::new();
    while !content.is_empty() {
        params.push(parse_param(&content, errors)?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    let ret = if input.peek(Token![->]) {
        let arrow: Token![->] = input.parse()?;
        parse_return_type(input, SpanRange::of(&arrow), errors)?
    } else {
        let span = SpanRange::single(input.span());
        errors.push(
            DslError::new(span, "a fusion fn must declare what it returns").with_hint(
                "add a return type, e.g. `-> Tensor<f32, [N, H]>` or a tuple of tensor types",
            ),
        );
        ReturnType {
            types: Vec::new(),
            tuple: false,
            span,
            valid: false,
        }
    };
    if input.peek(Token![where]) {
        let w: syn::WhereClause = input.parse()?;
        errors.push(DslError::new(
            SpanRange::of(&w),
            "`where` clauses are not supported on a fusion fn",
        ));
    }
    let block: syn::Block = input.parse()?;
    let body_end = SpanRange::single(block.brace_token.span.close());
    let (body, tail) = lower_block(&block, errors);
    let span = SpanRange::of(&fn_token).to(body_end);
    let span = match attrs.first() {
        Some(a) => SpanRange::of(a).to(span),
        None => span,
    };
    Ok(FusionFn {
        docs,
        vis: vis.to_token_stream(),
        name: name_of(&ident),
        params,
        ret,
        body,
        tail,
        span,
        body_end,
    })
}

/// The text of a `#[doc = "..."]` attribute (what `///` becomes).
fn doc_text(attr: &syn::Attribute) -> Option<String> {
    if !attr.path().is_ident("doc") {
        return None;
    }
    match &attr.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    }
}

fn parse_param(input: ParseStream, errors: &mut Vec<DslError>) -> syn::Result<Param> {
    let attrs = input.call(syn::Attribute::parse_outer)?;
    let start = input.span();
    if input.peek(Token![mut]) {
        let m: Token![mut] = input.parse()?;
        errors.push(
            DslError::new(
                SpanRange::of(&m),
                "`mut` parameters are not supported: values are immutable",
            )
            .with_hint("remove `mut`; rebind with `let x = ...;` to shadow"),
        );
    }
    let ident: syn::Ident = input.parse()?;
    input.parse::<Token![:]>()?;
    let mut ty = parse_type(input, errors)?;
    let mut layout = None;
    for attr in &attrs {
        if attr.path().is_ident("doc") {
            continue;
        }
        if !attr.path().is_ident("layout") {
            errors.push(
                DslError::new(SpanRange::of(attr), "unknown parameter attribute")
                    .with_hint("the only parameter attribute is #[layout(contiguity = [..], stride_order = [..], expanded = [..], static_sizes = true)]"),
            );
            continue;
        }
        if layout.is_some() {
            errors.push(
                DslError::new(
                    SpanRange::of(attr),
                    "a parameter takes one #[layout(...)] attribute",
                )
                .with_hint("merge the entries into one attribute"),
            );
            continue;
        }
        let mut l = Layout {
            span: Some(SpanRange::of(attr)),
            ..Layout::default()
        };
        attr.parse_args_with(|input: ParseStream| parse_layout(input, &mut l, errors))?;
        layout = Some(l);
    }
    match (&mut ty, layout) {
        (ParamType::Tensor(t), l) => t.layout = l,
        (ParamType::Scalar { .. } | ParamType::Invalid(_), Some(l)) => errors.push(DslError::new(
            l.span.unwrap_or_else(SpanRange::call_site),
            "#[layout] applies to tensor parameters only",
        )),
        (ParamType::Scalar { .. } | ParamType::Invalid(_), None) => {}
    }
    let end = match &ty {
        ParamType::Tensor(t) => t.span,
        ParamType::Scalar { span, .. } | ParamType::Invalid(span) => *span,
    };
    let span = match attrs.first() {
        Some(a) => SpanRange::of(a).to(end),
        None => SpanRange::single(start).to(end),
    };
    Ok(Param {
        name: name_of(&ident),
        ty,
        span,
    })
}

fn parse_type(input: ParseStream, errors: &mut Vec<DslError>) -> syn::Result<ParamType> {
    if input.peek(syn::Ident) && !input.peek2(Token![::]) {
        let fork = input.fork();
        let ident: syn::Ident = fork.parse()?;
        if ident == "Tensor" {
            return parse_tensor_type(input, errors).map(ParamType::Tensor);
        }
        if DataType::from_name(&ident.to_string()).is_some() || !fork.peek(Token![<]) {
            let ident: syn::Ident = input.parse()?;
            let span = SpanRange::of(&ident);
            if DataType::from_name(&ident.to_string()).is_none() {
                let mut err = DslError::new(span, format!("unknown type `{ident}`"));
                err = match closest(&ident.to_string(), DataType::ALL.iter().map(|d| d.name())) {
                    Some(s) => err.with_hint(format!("did you mean `{s}`?")),
                    None => err.with_hint("a parameter is `Tensor<dtype, [dims]>` or a scalar dtype (f32, f64, i32, i64, bool, f16, bf16, f8e4m3, f8e5m2)"),
                };
                errors.push(err);
            }
            return Ok(match DataType::from_name(&ident.to_string()) {
                Some(dtype) => ParamType::Scalar { dtype, span },
                None => ParamType::Invalid(span),
            });
        }
    }
    let ty: syn::Type = input.parse()?;
    let span = SpanRange::of(&ty);
    let hint = match &ty {
        syn::Type::Reference(_) => "tensors are passed by value in a fusion signature: remove the `&`",
        _ => "a parameter is `Tensor<dtype, [dims]>` or a scalar dtype (f32, f64, i32, i64, bool, f16, bf16, f8e4m3, f8e5m2)",
    };
    let text = ty
        .to_token_stream()
        .to_string()
        .replace(" < ", "<")
        .replace(" >", ">")
        .replace("& ", "&");
    errors
        .push(DslError::new(span, format!("unsupported parameter type `{text}`")).with_hint(hint));
    Ok(ParamType::Invalid(span))
}

/// `Tensor<dtype, [dims]>`.
fn parse_tensor_type(input: ParseStream, errors: &mut Vec<DslError>) -> syn::Result<TensorType> {
    let tensor: syn::Ident = input.parse()?;
    input.parse::<Token![<]>()?;
    let dtype_ident: syn::Ident = input.parse()?;
    let dtype = dtype_of(&dtype_ident, errors);
    let mut valid = dtype.is_some();

    input.parse::<Token![,]>().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected `,` and the dims: Tensor<dtype, [dims]>, e.g. Tensor<f32, [N, 4096]>",
        )
    })?;
    let content;
    bracketed!(content in input);
    let mut dims = Vec::new();
    while !content.is_empty() {
        dims.push(parse_dim(&content, errors)?);
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    let _ = input.parse::<Option<Token![,]>>()?;
    let close: Token![>] = input.parse()?;
    valid &= dims.iter().all(|d| d.kind != DimKind::Invalid);
    Ok(TensorType {
        dtype: dtype.unwrap_or(DataType::F32),
        dtype_span: SpanRange::of(&dtype_ident),
        dims,
        layout: None,
        span: SpanRange::of(&tensor).to(SpanRange::of(&close)),
        valid,
    })
}

fn parse_dim(input: ParseStream, errors: &mut Vec<DslError>) -> syn::Result<Dim> {
    if input.peek(Token![_]) {
        let u: Token![_] = input.parse()?;
        return Ok(Dim {
            kind: DimKind::Any,
            span: SpanRange::of(&u),
        });
    }
    if input.peek(syn::Ident) {
        let ident: syn::Ident = input.parse()?;
        return Ok(Dim {
            kind: DimKind::Named(ident.to_string()),
            span: SpanRange::of(&ident),
        });
    }
    if input.peek(syn::LitInt) {
        let lit: syn::LitInt = input.parse()?;
        let span = SpanRange::of(&lit);
        let kind = match lit.base10_parse::<i64>() {
            Ok(n) if lit.suffix().is_empty() => DimKind::Size(n),
            _ => {
                errors.push(DslError::new(span, format!("invalid dim `{lit}`")).with_hint("a dim is `_`, a name like `N`, `1` (broadcast) or a static size like `4096`"));
                DimKind::Invalid
            }
        };
        return Ok(Dim { kind, span });
    }
    let e: syn::Expr = input.parse()?;
    let span = SpanRange::of(&e);
    let hint = if matches!(&e, syn::Expr::Unary(_)) {
        "use `_` for a symbolic dim (not -1)"
    } else {
        "a dim is `_`, a name like `N`, `1` (broadcast) or a static size like `4096`"
    };
    errors.push(
        DslError::new(span, format!("invalid dim `{}`", e.to_token_stream())).with_hint(hint),
    );
    Ok(Dim {
        kind: DimKind::Invalid,
        span,
    })
}

fn parse_return_type(
    input: ParseStream,
    arrow: SpanRange,
    errors: &mut Vec<DslError>,
) -> syn::Result<ReturnType> {
    let mut valid = true;
    let mut one =
        |input: ParseStream, errors: &mut Vec<DslError>| -> syn::Result<Option<TensorType>> {
            match parse_type(input, errors)? {
                ParamType::Tensor(t) => Ok(Some(t)),
                ParamType::Invalid(_) => {
                    valid = false;
                    Ok(None)
                }
                ParamType::Scalar { dtype, span } => {
                    valid = false;
                    errors.push(
                        DslError::new(
                            span,
                            format!("a fusion returns tensors, found the scalar type `{dtype}`"),
                        )
                        .with_hint(
                            "scalars cannot be outputs; return a tensor, e.g. full([1], s, f32)",
                        ),
                    );
                    Ok(None)
                }
            }
        };
    if input.peek(syn::token::Paren) {
        let content;
        let paren = parenthesized!(content in input);
        let mut types = Vec::new();
        while !content.is_empty() {
            if let Some(t) = one(&content, errors)? {
                types.push(t);
            }
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        let span = SpanRange::single(paren.span.open()).to(SpanRange::single(paren.span.close()));
        if types.is_empty() && valid {
            valid = false;
            errors.push(DslError::new(
                arrow.to(span),
                "a fusion must return at least one tensor",
            ));
        }
        let valid = valid && types.iter().all(|t| t.valid);
        return Ok(ReturnType {
            types,
            tuple: true,
            span,
            valid,
        });
    }
    let start = input.span();
    let t = one(input, errors)?;
    let span = t.as_ref().map_or(SpanRange::single(start), |t| t.span);
    let valid = valid && t.as_ref().is_some_and(|t| t.valid);
    Ok(ReturnType {
        types: t.into_iter().collect(),
        tuple: false,
        span,
        valid,
    })
}

/// The inside of `#[layout(...)]`.
fn parse_layout(
    input: ParseStream,
    layout: &mut Layout,
    errors: &mut Vec<DslError>,
) -> syn::Result<()> {
    const KEYS: [&str; 4] = ["contiguity", "stride_order", "expanded", "static_sizes"];
    while !input.is_empty() {
        let key: syn::Ident = input.parse()?;
        let k = key.to_string();
        if k == "static_sizes" && (input.is_empty() || input.peek(Token![,])) {
            layout.static_sizes = true;
        } else {
            input.parse::<Token![=]>()?;
            match k.as_str() {
                "contiguity" => {
                    layout.contiguity = Some(if input.peek(syn::LitBool) {
                        ContiguitySpec::All(input.parse::<syn::LitBool>()?.value)
                    } else {
                        let content;
                        bracketed!(content in input);
                        let mut v = Vec::new();
                        while !content.is_empty() {
                            if content.peek(Token![_]) {
                                content.parse::<Token![_]>()?;
                                v.push(None);
                            } else {
                                v.push(Some(content.parse::<syn::LitBool>()?.value));
                            }
                            if content.is_empty() {
                                break;
                            }
                            content.parse::<Token![,]>()?;
                        }
                        ContiguitySpec::PerDim(v)
                    })
                }
                "stride_order" => layout.stride_order = Some(parse_usizes(input)?),
                "expanded" => layout.expanded = parse_usizes(input)?,
                "static_sizes" => layout.static_sizes = input.parse::<syn::LitBool>()?.value,
                _ => {
                    let value: syn::Expr = input.parse()?;
                    let hint = match closest(&k, KEYS) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!("the layout keys are {}", KEYS.join(", ")),
                    };
                    errors.push(
                        DslError::new(
                            SpanRange::of(&key).to(SpanRange::of(&value)),
                            format!("unknown layout key `{k}`"),
                        )
                        .with_hint(hint),
                    );
                }
            }
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(())
}

fn parse_usizes(input: ParseStream) -> syn::Result<Vec<usize>> {
    let content;
    bracketed!(content in input);
    let list = content.parse_terminated(
        |p: ParseStream| p.parse::<syn::LitInt>()?.base10_parse::<usize>(),
        Token![,],
    )?;
    Ok(list.into_iter().collect())
}
